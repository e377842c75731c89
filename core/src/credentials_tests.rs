use super::*;

#[test]
fn passwords_and_token_users_in_urls_are_redacted_wherever_they_stand() {
    let cases = [
        (
            "https://alice:s3cret@git.example.com/org/repo.git",
            "https://alice:***@git.example.com/org/repo.git",
        ),
        (
            "https://ghp_0123456789@github.com/o/r",
            "https://***@github.com/o/r",
        ),
        (
            "fetching http://u:p%40ss@h:8080?x=1 failed; retry https://v:w@i/",
            "fetching http://u:***@h:8080?x=1 failed; retry https://v:***@i/",
        ),
        ("'https://a:b@c'", "'https://a:***@c'"),
        ("ssh://git@host/repo", "ssh://git@host/repo"),
        ("ssh://git:pw@host/repo", "ssh://git:***@host/repo"),
        ("git+ssh://git@host/repo", "git+ssh://git@host/repo"),
        ("https://host/path@v1", "https://host/path@v1"),
        ("no url here", "no url here"),
        ("https://host.example/a", "https://host.example/a"),
        ("://@", "://***@"),
        ("https://a:b@", "https://a:***@"),
    ];
    for (text, expected) in cases {
        assert_eq!(redact_secrets(text), expected, "{text}");
    }
}

#[test]
fn text_without_secrets_is_not_copied() {
    assert!(matches!(redact_secrets("https://host/x"), Cow::Borrowed(_)));
    assert!(matches!(redact_secrets("plain"), Cow::Borrowed(_)));
}

#[test]
fn redaction_survives_hostile_text() {
    let long = format!("https://{}:{}@h", "u".repeat(100_000), "p".repeat(100_000));
    let redacted = redact_secrets(&long);
    assert!(!redacted.contains("ppp"));
    for text in [
        "://://://",
        "https://é:ü@ñ/",
        "a://\u{0}:\u{1}@x",
        "https://@@@@",
        "https://:@",
        "\u{202e}https://x:y@z",
    ] {
        let redacted = redact_secrets(text);
        assert!(
            !redacted.contains(":y@") && !redacted.contains(":ü@"),
            "{redacted}"
        );
    }
}

#[test]
fn a_url_with_a_password_splits_into_url_user_and_token() {
    assert_eq!(
        split_url_credentials("https://alice:t%40k@git.example.com:8443/r.git"),
        Some((
            "https://git.example.com:8443/r.git".into(),
            "alice".into(),
            "t@k".into()
        ))
    );
    assert_eq!(split_url_credentials("https://alice@host/r"), None);
    assert_eq!(split_url_credentials("ssh://git:pw@host/r"), None);
    assert_eq!(split_url_credentials("/local/path"), None);
    assert_eq!(split_url_credentials("https://host/a:b@c"), None);
}

#[test]
fn credentials_are_validated_and_never_debug_printed() {
    let https = GitCredential::Https {
        username: "alice".into(),
        token: "tok-123456".into(),
    };
    assert!(https.clone().validated().is_ok());
    assert!(!format!("{https:?}").contains("tok-123456"));
    let bad = [
        GitCredential::Https {
            username: String::new(),
            token: "t".into(),
        },
        GitCredential::Https {
            username: "a:b".into(),
            token: "t".into(),
        },
        GitCredential::Https {
            username: "a".into(),
            token: "line\nbreak".into(),
        },
        GitCredential::Https {
            username: "a".into(),
            token: "x".repeat(5000),
        },
        GitCredential::Ssh {
            key_path: "relative/id".into(),
            passphrase: None,
        },
        GitCredential::Ssh {
            key_path: "/k".into(),
            passphrase: Some(String::new()),
        },
    ];
    for credential in bad {
        assert!(credential.validated().is_err());
    }
    let ssh = GitCredential::Ssh {
        key_path: "/keys/id".into(),
        passphrase: Some("hunter22".into()),
    };
    assert!(!format!("{ssh:?}").contains("hunter22"));
    assert_eq!(ssh.summary().key_path.as_deref(), Some("/keys/id"));
}

#[test]
fn scrub_removes_the_credential_s_own_secret_and_url_passwords() {
    let https = GitCredential::Https {
        username: "alice".into(),
        token: "tok-123456".into(),
    };
    assert_eq!(
        https.scrub("auth tok-123456 failed for https://alice:tok-123456@h/r"),
        "auth *** failed for https://alice:***@h/r"
    );
}

#[test]
fn credentials_round_trip_as_tagged_json_and_refuse_unknown_fields() {
    let json = r#"{"kind":"https","username":"u","token":"t"}"#;
    let credential: GitCredential = serde_json::from_str(json).unwrap();
    assert_eq!(
        credential,
        GitCredential::Https {
            username: "u".into(),
            token: "t".into()
        }
    );
    let ssh: GitCredential = serde_json::from_str(r#"{"kind":"ssh","key_path":"/k"}"#).unwrap();
    assert!(matches!(
        ssh,
        GitCredential::Ssh {
            passphrase: None,
            ..
        }
    ));
    for bad in [
        r#"{"kind":"https","username":"u","token":"t","extra":1}"#,
        r#"{"kind":"ftp","username":"u"}"#,
        r#"{"username":"u","token":"t"}"#,
        r#"{"kind":"ssh"}"#,
    ] {
        assert!(serde_json::from_str::<GitCredential>(bad).is_err(), "{bad}");
    }
}

#[test]
fn repository_answers_show_a_stored_url_without_its_token() {
    // A repository added before credentials existed may hold its token in its URL.
    let row = crate::db::RepositoryRow {
        id: 1,
        name: "r".into(),
        url: "https://alice:tok-legacy-99@git.example.com/r.git".into(),
        branch: "main".into(),
        created_at: 0,
        poll_seconds: None,
        machine_labels: String::new(),
    };
    let json = serde_json::to_string(&row).unwrap();
    assert!(!json.contains("tok-legacy-99"), "{json}");
    assert!(
        json.contains("https://alice:***@git.example.com/r.git"),
        "{json}"
    );
}
