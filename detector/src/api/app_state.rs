//! What the API's handlers share ([`AppState`]): the state the pipeline
//! publishes, and the handles `serve` builds once the pipeline runs.

use std::path::PathBuf;
use std::sync::Arc;

use super::settings::ServeError;
use crate::pipeline::PipelineHandle;
use crate::reload::ModelSlot;
use crate::state::{SharedState, State};

/// Settings of the endpoints that change things (silences, labels, model
/// reloads): they need the bearer token; with no token configured they are
/// refused.
#[derive(Debug, Default)]
pub struct Admin {
    pub token: Option<String>,
    /// Token for reads (none: reads are open); see [`super::guard`].
    pub read_token: Option<String>,
    /// Operator labels (`POST /v1/labels`) are appended here (contract CSV).
    pub labels_file: Option<PathBuf>,
}

impl Admin {
    /// The tokens from the variables `api.token_env` and
    /// `api.read_token_env` name (an empty value counts as unset). A read
    /// token asked for but missing is an error, not open reads: the
    /// operator meant reads to be closed.
    pub fn from_env(
        token_env: &str,
        read_token_env: Option<&str>,
        labels_file: PathBuf,
    ) -> Result<Admin, ServeError> {
        let var = |name: &str| std::env::var(name).ok().filter(|t| !t.is_empty());
        let token = var(token_env);
        if token.is_none() {
            tracing::info!(
                "{token_env} is unset: silences, labels and model reloads over REST are disabled"
            );
        }
        let read_token = match read_token_env {
            None => None,
            Some(name) => Some(var(name).ok_or_else(|| ServeError::ReadTokenUnset {
                var: name.to_owned(),
            })?),
        };
        Ok(Admin {
            token,
            read_token,
            labels_file: Some(labels_file),
        })
    }
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
