//! Health as the AND of its components, as upstream reports it on `/healthcheck` and on
//! gRPC health (service `ratelimit`).

use std::sync::Mutex;

use tokio::sync::watch;

#[derive(Debug, Clone, Copy)]
struct Components {
    sigterm: bool,
    config: bool,
    backend: bool,
}

impl Components {
    fn healthy(self) -> bool {
        self.sigterm && self.config && self.backend
    }
}

/// The health components. A component that is not in use stays healthy.
#[derive(Debug)]
pub struct Health {
    components: Mutex<Components>,
    tx: watch::Sender<bool>,
}

impl Health {
    /// `config_required`: `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`, under which health stays
    /// down until a configuration with at least one domain is loaded.
    pub fn new(config_required: bool) -> Self {
        let c = Components {
            sigterm: true,
            config: !config_required,
            backend: true,
        };
        Health {
            components: Mutex::new(c),
            tx: watch::Sender::new(c.healthy()),
        }
    }

    /// Whether every component is healthy.
    pub fn healthy(&self) -> bool {
        *self.tx.borrow()
    }

    /// Follows the overall health (for the gRPC health service).
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }

    fn update(&self, f: impl FnOnce(&mut Components)) {
        let mut c = self.components.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut c);
        self.tx.send_if_modified(|h| {
            let new = c.healthy();
            let changed = *h != new;
            *h = new;
            changed
        });
    }

    /// A termination signal arrived: report unhealthy from now on.
    pub fn fail_sigterm(&self) {
        self.update(|c| c.sigterm = false);
    }

    /// Sets the configuration component.
    pub fn set_config(&self, ok: bool) {
        self.update(|c| c.config = ok);
    }

    /// Sets the store component.
    pub fn set_backend(&self, ok: bool) {
        self.update(|c| c.backend = ok);
    }
}
