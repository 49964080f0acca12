//! While a cell trains, the kernels cubecl has compiled so far are
//! vouched for every [`EVERY`], so a cell stopped at its time limit,
//! killed or crashed leaves them to the next cell: a JIT backend whose
//! compiling outlasts one cell's time still gets further each cell.

use super::cache::{lengths, vouch};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the folder is recorded while a cell trains: at most this much
/// compiling is lost when a cell is killed.
pub const EVERY: Duration = Duration::from_secs(10);

/// A thread recording one cache folder while this process holds it
/// (its shared lock keeps any other process from checking the folder, so
/// nothing is cut while it grows).
#[derive(Debug)]
pub struct Keeper {
    stopped: Arc<(Mutex<bool>, Condvar)>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Keeper {
    /// Start recording `dir` every `every` ([`EVERY`] in a cell), whenever a file grew.
    pub fn start(dir: &Path, every: Duration) -> Keeper {
        let stopped = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = Arc::clone(&stopped);
        let dir = dir.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("kernel-cache".into())
            .spawn(move || keep(&dir, every, &flag))
            .ok();
        Keeper { stopped, thread: Mutex::new(thread) }
    }

    /// Stop recording and wait for the thread; the caller records last.
    pub fn stop(&self) {
        let (flag, wake) = &*self.stopped;
        if let Ok(mut stopped) = flag.lock() {
            *stopped = true;
            wake.notify_all();
        }
        let thread = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

fn keep(dir: &Path, every: Duration, stopped: &(Mutex<bool>, Condvar)) {
    let (flag, wake) = stopped;
    // Nothing taken as recorded: the first tick records whatever is there
    // (another process's growth too, where this one did not check the folder).
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    let Ok(mut done) = flag.lock() else { return };
    // A stop that came before this thread first waits ends it at once.
    while !*done {
        done = match wake.wait_timeout(done, every) {
            Ok((guard, _)) => guard,
            Err(_) => return,
        };
        if *done {
            return;
        }
        let now = lengths(dir);
        if now != seen {
            match vouch(dir) {
                Ok(()) => seen = now,
                // Tried again at the next tick.
                Err(e) => {
                    eprintln!(
                        "warning: {e}; kernels compiled since the last record are lost if the cell is killed"
                    )
                }
            }
        }
    }
}
