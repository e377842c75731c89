//! Webhook deliveries: the first byte picks the provider; the rest is a signature header and
//! a body, split at the first NUL. Reading the push or the remote it names, checking the
//! signature and reading the event header never panic, and what is accepted is within the
//! limits the server relies on.
#![no_main]

use kymo_core::webhook::{
    Event, Provider, RemoteIdentity, parse_push, parse_remote, verify_hmac_sha256, verify_token,
};
use libfuzzer_sys::fuzz_target;

const PROVIDERS: [Provider; 3] = [Provider::GitHub, Provider::GitLab, Provider::Gitea];

fn within_limits(remote: &RemoteIdentity) {
    assert!(
        remote.full_name.as_ref().is_none_or(|n| n.len() <= 512),
        "{remote:?}"
    );
    assert!(
        remote.urls.iter().all(|u| !u.is_empty() && u.len() <= 2048),
        "{remote:?}"
    );
    let _ = remote.matches("https://example.com/owner/name.git");
}

fuzz_target!(|data: &[u8]| {
    let Some((selector, rest)) = data.split_first() else {
        return;
    };
    let provider = PROVIDERS[usize::from(*selector) % PROVIDERS.len()];
    let (header, body) = match rest.iter().position(|&b| b == 0) {
        Some(nul) => (&rest[..nul], &rest[nul + 1..]),
        None => (&[][..], rest),
    };
    let header = String::from_utf8_lossy(header);
    let _ = verify_hmac_sha256("fuzz-secret", body, &header);
    let _ = verify_token("fuzz-secret", &header);
    if let Event::Other(name) = Event::parse(provider, &header) {
        assert!(name.chars().count() <= 64);
    }
    if let Ok(push) = parse_push(provider, body) {
        assert!(
            push.branch
                .as_ref()
                .is_none_or(|b| !b.is_empty() && b.len() <= 200),
            "{push:?}"
        );
        within_limits(&push.remote);
    }
    within_limits(&parse_remote(body));
});
