//! Health as the AND of its components, as upstream reports it.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The health components. A component that is not in use stays healthy.
#[derive(Debug)]
pub struct Health {
    sigterm: AtomicBool,
    config: AtomicBool,
    backend: AtomicBool,
}

impl Health {
    /// `config_required`: `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`, under which health stays
    /// down until a configuration with at least one domain is loaded.
    pub fn new(config_required: bool) -> Self {
        Health {
            sigterm: AtomicBool::new(true),
            config: AtomicBool::new(!config_required),
            backend: AtomicBool::new(true),
        }
    }

    /// Whether every component is healthy.
    pub fn healthy(&self) -> bool {
        self.sigterm.load(Relaxed) && self.config.load(Relaxed) && self.backend.load(Relaxed)
    }

    /// A termination signal arrived: report unhealthy from now on.
    pub fn fail_sigterm(&self) {
        self.sigterm.store(false, Relaxed);
    }

    /// Sets the configuration component.
    pub fn set_config(&self, ok: bool) {
        self.config.store(ok, Relaxed);
    }

    /// Sets the store component.
    pub fn set_backend(&self, ok: bool) {
        self.backend.store(ok, Relaxed);
    }
}
