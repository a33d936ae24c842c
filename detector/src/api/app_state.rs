//! What the API's handlers share ([`AppState`]): the state the pipeline
//! publishes, and the handles `serve` builds once the pipeline runs.

use std::path::PathBuf;
use std::sync::Arc;

use crate::pipeline::PipelineHandle;
use crate::reload::ModelSlot;
use crate::state::{SharedState, State};

/// Settings of the endpoints that change things (silences, labels, model
/// reloads): they need the bearer token; with no token configured they are
/// refused.
#[derive(Debug, Default)]
pub struct Admin {
    pub token: Option<String>,
    /// Operator labels (`POST /v1/labels`) are appended here (contract CSV).
    pub labels_file: Option<PathBuf>,
}

/// The alert outbox and the names of its receivers (delivery metrics).
#[derive(Clone)]
pub struct Delivery {
    pub outbox: Arc<alerts::Outbox>,
    pub receivers: Arc<[String]>,
}

/// What the handlers share: the published state (reached through `Deref`)
/// and the service's handles. Without a pipeline (tests, or a service
/// still starting) commands answer 503.
#[derive(Clone)]
pub struct AppState {
    pub shared: State,
    pub admin: Arc<Admin>,
    /// Commands into the running pipeline.
    pub pipeline: Option<PipelineHandle>,
    /// Where model reloads come from.
    pub models: Option<Arc<ModelSlot>>,
    pub delivery: Option<Delivery>,
}

impl AppState {
    pub fn new(shared: State) -> Self {
        AppState {
            shared,
            admin: Arc::new(Admin::default()),
            pipeline: None,
            models: None,
            delivery: None,
        }
    }

    pub fn with_admin(mut self, admin: Admin) -> Self {
        self.admin = Arc::new(admin);
        self
    }
}

impl From<State> for AppState {
    fn from(shared: State) -> Self {
        AppState::new(shared)
    }
}

impl std::ops::Deref for AppState {
    type Target = SharedState;
    fn deref(&self) -> &SharedState {
        &self.shared
    }
}
