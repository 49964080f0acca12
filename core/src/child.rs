//! Child processes: a cell process, a rank or a Python script started by
//! this one dies with the thread that started it.

use std::process::Command;

/// Have the kernel kill the process `command` starts once the thread that
/// started it ends: a cell process whose runner was killed would otherwise
/// train on, and hold its peers in an all-reduce that never completes.
/// (The thread waits for its child, so only the runner's death fires it.)
#[cfg(target_os = "linux")]
pub fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook runs in the forked child before exec and only makes
    // one async-signal-safe system call.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub fn die_with_parent(_command: &mut Command) {}
