//! Secrets an operator sets are refused at start when they are too short, a placeholder, or
//! the value an example file once shipped: each of those is known to everyone.

use super::{Config, Secret};

/// The fewest bytes a shared secret may have.
pub const MIN_SECRET_BYTES: usize = 32;

/// Values published in example files: they open and sign for anyone who read the example.
const KNOWN_EXAMPLES: &[&str] = &["yFYFKlRlMEA/N3Cm/pACvNBG+tGWAHJATtSuGbs6mnI="];

/// Why a configured secret is refused; each names its variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeakSecret {
    #[error("{var} holds a value published in an example file; set your own (`sagents secrets generate-key` makes one)")]
    Example { var: &'static str },
    #[error("{var} holds a placeholder (`change-me…`); set a real secret")]
    Placeholder { var: &'static str },
    #[error("{var} is {len} bytes long; a secret must be at least {MIN_SECRET_BYTES} bytes")]
    TooShort { var: &'static str, len: usize },
}

fn is_placeholder(value: &str) -> bool {
    let lower = value.trim().to_ascii_lowercase();
    ["change-me", "changeme", "change_me"]
        .iter()
        .any(|p| lower.starts_with(p))
}

fn is_example(value: &str) -> bool {
    KNOWN_EXAMPLES.contains(&value.trim())
}

/// A shared secret (e.g. `SAGENTS_GRANT_SECRET`): no placeholder, no example, 32 bytes or more.
pub fn check_shared(var: &'static str, value: &str) -> Result<(), WeakSecret> {
    let value = value.trim();
    if is_placeholder(value) {
        return Err(WeakSecret::Placeholder { var });
    }
    if is_example(value) {
        return Err(WeakSecret::Example { var });
    }
    if value.len() < MIN_SECRET_BYTES {
        return Err(WeakSecret::TooShort {
            var,
            len: value.len(),
        });
    }
    Ok(())
}

/// Sealing keys, the sealing one first: no entry may be a placeholder and the sealing one may
/// not be an example's; a later one may, so values sealed under it can still be opened and
/// resealed. Each key's length is [`super::Sealer`]'s to check.
pub fn check_keys(var: &'static str, text: &str) -> Result<(), WeakSecret> {
    let mut entries = text
        .split([',', '\n'])
        .map(str::trim)
        .filter(|e| !e.is_empty());
    if let Some(first) = entries.next() {
        if is_placeholder(first) {
            return Err(WeakSecret::Placeholder { var });
        }
        if is_example(first) {
            return Err(WeakSecret::Example { var });
        }
    }
    match entries.find(|e| is_placeholder(e)) {
        Some(_) => Err(WeakSecret::Placeholder { var }),
        None => Ok(()),
    }
}

fn given(secret: &Option<Secret>) -> Option<&str> {
    secret
        .as_ref()
        .map(Secret::expose)
        .filter(|s| !s.trim().is_empty())
}

impl Config {
    /// Refuses a configured secret (the database password among them) that is too short, a
    /// placeholder or an example's.
    pub fn check_secrets(&self) -> Result<(), WeakSecret> {
        if let Some(keys) = given(&self.secret_key) {
            check_keys("SAGENTS_SECRET_KEY", keys)?;
        }
        let file = self.secret_key_file.as_ref();
        if let Some(text) = file.and_then(|f| std::fs::read_to_string(f).ok()) {
            // An unreadable file is the sealer's to report.
            check_keys("SAGENTS_SECRET_KEY_FILE", &text)?;
        }
        if let Some(secret) = given(&self.grant_secret) {
            check_shared("SAGENTS_GRANT_SECRET", secret)?;
        }
        let url = url::Url::parse(&self.database_url).ok();
        if url.is_some_and(|u| u.password().is_some_and(is_placeholder)) {
            return Err(WeakSecret::Placeholder {
                var: "SAGENTS_DATABASE_URL",
            });
        }
        if given(&self.grant_signing_key).is_some_and(is_placeholder) {
            return Err(WeakSecret::Placeholder {
                var: "SAGENTS_GRANT_SIGNING_KEY",
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

    fn config() -> Config {
        Config::with_database("sqlite://x")
    }

    #[test]
    fn the_old_example_key_and_placeholders_are_refused_as_the_sealing_key() {
        let mut c = config();
        c.secret_key = Some(KNOWN_EXAMPLES[0].parse().unwrap());
        let refused = c.check_secrets().unwrap_err();
        assert_eq!(
            refused,
            WeakSecret::Example {
                var: "SAGENTS_SECRET_KEY"
            }
        );
        assert!(refused.to_string().starts_with("SAGENTS_SECRET_KEY "));
        c.secret_key = Some("change-me-secret-key".parse().unwrap());
        assert_eq!(
            c.check_secrets(),
            Err(WeakSecret::Placeholder {
                var: "SAGENTS_SECRET_KEY"
            })
        );
        // Behind a fresh key the example one still opens what it sealed, for a reseal.
        c.secret_key = Some(format!("{GOOD_KEY},{}", KNOWN_EXAMPLES[0]).parse().unwrap());
        assert_eq!(c.check_secrets(), Ok(()));
        c.secret_key = Some(format!("{GOOD_KEY},CHANGE-ME").parse().unwrap());
        assert!(c.check_secrets().is_err());
    }

    #[test]
    fn a_key_file_is_checked_like_the_variable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys");
        std::fs::write(&path, format!("{}\n", KNOWN_EXAMPLES[0])).unwrap();
        let mut c = config();
        c.secret_key_file = Some(path.clone());
        assert_eq!(
            c.check_secrets(),
            Err(WeakSecret::Example {
                var: "SAGENTS_SECRET_KEY_FILE"
            })
        );
        std::fs::write(&path, format!("{GOOD_KEY}\n")).unwrap();
        assert_eq!(c.check_secrets(), Ok(()));
    }

    #[test]
    fn a_grant_secret_must_be_long_and_not_a_placeholder() {
        let mut c = config();
        c.grant_secret = Some("change-me-grant-secret".parse().unwrap());
        assert_eq!(
            c.check_secrets(),
            Err(WeakSecret::Placeholder {
                var: "SAGENTS_GRANT_SECRET"
            })
        );
        c.grant_secret = Some("short-but-random-Zq81".parse().unwrap());
        let refused = c.check_secrets().unwrap_err();
        assert_eq!(
            refused,
            WeakSecret::TooShort {
                var: "SAGENTS_GRANT_SECRET",
                len: 21
            }
        );
        assert!(refused.to_string().contains("SAGENTS_GRANT_SECRET"));
        c.grant_secret = Some("k".repeat(MIN_SECRET_BYTES).parse().unwrap());
        assert_eq!(c.check_secrets(), Ok(()));
        // Unset (or empty, as compose passes an unset one) is not a weak secret.
        c.grant_secret = Some("".parse().unwrap());
        assert_eq!(c.check_secrets(), Ok(()));
        c.grant_signing_key = Some("change-me".parse().unwrap());
        assert!(c.check_secrets().is_err());
    }

    #[test]
    fn a_database_password_may_not_be_a_placeholder() {
        let mut c = Config::with_database("postgres://sagents:change-me-postgres-password@db/s");
        assert_eq!(
            c.check_secrets(),
            Err(WeakSecret::Placeholder {
                var: "SAGENTS_DATABASE_URL"
            })
        );
        c.database_url = "postgres://sagents:Zq81kT0p@db/s".into();
        assert_eq!(c.check_secrets(), Ok(()));
        c.database_url = "sqlite://data/sagents.db".into();
        assert_eq!(c.check_secrets(), Ok(()));
    }
}
