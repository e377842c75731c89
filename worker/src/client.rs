//! The worker's HTTP side of the protocol with the server (and the CLI's, for uploads).

use std::time::Duration;

use anyhow::{Context, bail};
use kymo_core::protocol::{
    ApiErrorBody, ClaimRequest, ClaimResponse, ClaimedJob, Completion, Heartbeat,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// An authenticated client of one kymo server.
#[derive(Clone)]
pub struct ServerClient {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
}

/// A refusal by the server: its status and its message.
#[derive(Debug, thiserror::Error)]
#[error("the server answered {status}: {message}")]
pub struct Refused {
    pub status: u16,
    pub message: String,
}

impl ServerClient {
    pub fn new(base: &str, token: Option<String>) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(300)))
            .http_status_as_error(false)
            .build()
            .into();
        Self {
            base: base.trim_end_matches('/').to_owned(),
            token,
            agent,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.base)
    }

    fn finish<T: DeserializeOwned>(
        &self,
        what: &str,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> anyhow::Result<T> {
        let mut response = self.accepted(what, response)?;
        response
            .body_mut()
            .with_config()
            .limit(64 * 1024 * 1024)
            .read_json()
            .with_context(|| format!("{what}: the server's answer is not the expected JSON"))
    }

    /// The response when the server accepted the request (2xx), else its refusal.
    fn accepted(
        &self,
        what: &str,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> anyhow::Result<ureq::http::Response<ureq::Body>> {
        let mut response = response.with_context(|| {
            format!(
                "{what}: cannot reach the server at {}: is `kymo serve` running there? \
                     Pass --server URL (or set KYMO_SERVER) to use another",
                self.base
            )
        })?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(response);
        }
        let message = response
            .body_mut()
            .read_json::<ApiErrorBody>()
            .map(|b| b.error)
            .unwrap_or_else(|_| "no details".into());
        let hint = match status {
            401 => {
                " (pass --token or set KYMO_TOKEN: `kymo token create --admin NAME` on the server's \
                 machine, where the CLI also finds the admin token beside the database, KYMO_DB)"
            }
            403 => " (this needs a token of another scope: an admin token changes things)",
            413 => " (split the upload into smaller ones)",
            404 if what.contains(" /repos/") => {
                " (`kymo repo list` shows the tracked repositories)"
            }
            _ => "",
        };
        Err(Refused { status, message }).with_context(|| format!("{what}{hint}"))
    }

    /// `GET` a JSON document.
    pub fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        let mut request = self.agent.get(self.url(path));
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        self.finish(&format!("GET {path}"), request.call())
    }

    /// `POST` a JSON body and read the JSON answer.
    pub fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> anyhow::Result<T> {
        self.post_with_key(path, body, None)
    }

    /// `POST` a JSON body under an `Idempotency-Key` (when given): the server stores what a
    /// key names once, so a retry after a timeout gets the first attempt's answer.
    pub fn post_with_key<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        key: Option<&str>,
    ) -> anyhow::Result<T> {
        let mut request = self.agent.post(self.url(path));
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        self.finish(&format!("POST {path}"), request.send_json(body))
    }

    /// `PUT` a JSON body and read the JSON answer.
    pub fn put<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> anyhow::Result<T> {
        let mut request = self.agent.put(self.url(path));
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        self.finish(&format!("PUT {path}"), request.send_json(body))
    }

    /// `DELETE` a resource; the answer carries no body.
    pub fn delete(&self, path: &str) -> anyhow::Result<()> {
        let mut request = self.agent.delete(self.url(path));
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        self.accepted(&format!("DELETE {path}"), request.call())?;
        Ok(())
    }

    pub fn claim(&self, request: &ClaimRequest) -> anyhow::Result<Option<ClaimedJob>> {
        let response: ClaimResponse = self.post("/worker/claim", request)?;
        Ok(response.job)
    }

    /// Renews a lease; `Ok(false)` when the server says the lease is gone.
    /// Renews the job's lease, saying what it is doing; `false` when the lease is gone (the
    /// job was cancelled, or it expired and the server queued it again).
    pub fn heartbeat(&self, job: &ClaimedJob, phase: Option<&str>) -> anyhow::Result<bool> {
        let beat = Heartbeat {
            lease_id: job.lease_id.clone(),
            phase: phase.map(str::to_owned),
        };
        match self
            .post::<_, serde_json::Value>(&format!("/worker/jobs/{}/heartbeat", job.id), &beat)
        {
            Ok(_) => Ok(true),
            Err(err) if is_conflict(&err) => Ok(false),
            Err(err) => Err(err),
        }
    }

    pub fn complete(&self, job: &ClaimedJob, completion: &Completion) -> anyhow::Result<()> {
        let path = format!("/worker/jobs/{}/complete", job.id);
        let _: serde_json::Value = self.post(&path, completion)?;
        Ok(())
    }

    /// Waits until `GET /healthz` answers, for up to `wait`.
    pub fn wait_healthy(&self, wait: Duration) -> anyhow::Result<()> {
        let deadline = std::time::Instant::now() + wait;
        loop {
            let healthy = self
                .agent
                .get(format!("{}/healthz", self.base))
                .call()
                .is_ok_and(|r| r.status().is_success());
            if healthy {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                bail!(
                    "the server at {} did not become healthy: is `kymo serve` running there? \
                     Pass --server URL (or set KYMO_SERVER) to check another",
                    self.base
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Whether an error is the server's 409 (a lease that is no longer ours).
pub fn is_conflict(err: &anyhow::Error) -> bool {
    err.downcast_ref::<Refused>()
        .is_some_and(|r| r.status == 409)
}
