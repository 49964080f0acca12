//! What a run says on stderr while it goes: progress bars, or one line
//! per finished repeat.

use crate::config::Cell;
use crate::runner::RunOptions;

/// Progress on stderr: bars, or one line per finished repeat.
pub(crate) struct Progress {
    multi: indicatif::MultiProgress,
    pub(super) bars: bool,
    quiet: bool,
}

impl Progress {
    pub(super) fn new(options: &RunOptions) -> Self {
        let multi = if options.progress {
            indicatif::MultiProgress::new()
        } else {
            indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden())
        };
        Self { multi, bars: options.progress, quiet: options.quiet }
    }

    pub(super) fn say(&self, line: String) {
        if self.bars {
            let _ = self.multi.println(line);
        } else if !self.quiet {
            eprintln!("{line}");
        }
    }

    pub(super) fn bar(&self, cell: &Cell, repeat: u32) -> indicatif::ProgressBar {
        let bar = self.multi.add(indicatif::ProgressBar::new(0));
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{prefix:.bold} [{bar:30}] {pos}/{len} steps  {msg}  eta {eta}",
        )
        .map(|s| s.progress_chars("=> "))
        {
            bar.set_style(style);
        }
        let repeats = cell.plan.repeats_per_cell();
        bar.set_prefix(if repeats > 1 {
            format!("{} #{repeat}/{repeats}", cell.id)
        } else {
            cell.id.clone()
        });
        bar
    }
}
