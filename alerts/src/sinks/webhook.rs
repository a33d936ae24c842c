//! Generic webhook: `POST` of one alert event per request, exactly the
//! contract JSON (`shared/contracts/alerts.md`). Any 2xx accepts.

use crate::route::Notification;
use crate::sinks::{Http, Outcome};

/// A generic webhook receiver.
#[derive(Debug)]
pub struct WebhookSink {
    pub(crate) name: String,
    pub(crate) http: Http,
}

impl WebhookSink {
    pub(crate) async fn deliver(&self, batch: &[Notification]) -> Outcome {
        for ev in batch.iter().flat_map(|n| &n.events) {
            let body = match serde_json::to_value(ev) {
                Ok(b) => b,
                Err(e) => {
                    return Outcome::Reject {
                        status: 0,
                        answer: format!("cannot encode event: {e}"),
                    };
                }
            };
            let outcome = self.http.post_json(&body, None).await;
            if outcome != Outcome::Accepted {
                return outcome;
            }
        }
        Outcome::Accepted
    }
}
