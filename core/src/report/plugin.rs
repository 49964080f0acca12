//! A reporter plugin as one more [`Report`]: events go in as schema JSON, its
//! artifacts come back at the end.

use super::{Report, ReportError, Stamped};
use crate::plugin::ReporterInstance;

/// Forwards events to a reporter plugin; remembers its first failure.
pub struct PluginReport {
    instance: ReporterInstance,
    /// Built into benchkit (`builtin:<name>`), not loaded from a file.
    builtin: bool,
    failed: Option<String>,
}

impl PluginReport {
    pub fn new(instance: ReporterInstance, builtin: bool) -> Self {
        Self { instance, builtin, failed: None }
    }

    fn send(&mut self, event: &Stamped) {
        if self.failed.is_some() || !self.instance.takes(event) {
            return;
        }
        let text = self.instance.event_text(event);
        let result = self.instance.on_event(&text).map_err(|e| e.to_string());
        if let Err(e) = result {
            self.failed = Some(e);
        }
    }
}

impl Report for PluginReport {
    fn name(&self) -> String {
        self.instance.origin().to_string()
    }

    fn builtin(&self) -> bool {
        self.builtin
    }

    fn event(&mut self, event: &Stamped) {
        self.send(event);
    }

    fn finish(&mut self) -> Result<Vec<(String, Vec<u8>)>, ReportError> {
        if let Some(message) = self.failed.take() {
            return Err(ReportError { reporter: self.instance.origin().to_string(), message });
        }
        self.instance
            .finish()
            .map_err(|e| ReportError { reporter: self.instance.origin().to_string(), message: e.to_string() })
    }
}
