//! Settings that hold secrets: `Debug` and `Display` never print them.

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

/// A secret value; read it with [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_owned()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// A database URL whose password `Debug` and `Display` hide; it derefs to the full URL.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    /// The URL with its password, if any, replaced by `***`.
    pub fn redacted(&self) -> String {
        match url::Url::parse(&self.0) {
            Ok(mut u) if u.password().is_some() => {
                let _ = u.set_password(Some("***"));
                u.to_string()
            }
            _ => self.0.clone(),
        }
    }
}

impl DatabaseUrl {
    /// The full URL, password included, for connecting.
    pub fn expose(&self) -> String {
        self.0.clone()
    }
}

impl Deref for DatabaseUrl {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<String> for DatabaseUrl {
    fn from(s: String) -> Self {
        DatabaseUrl(s)
    }
}

impl From<&str> for DatabaseUrl {
    fn from(s: &str) -> Self {
        DatabaseUrl(s.to_owned())
    }
}

impl FromStr for DatabaseUrl {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(DatabaseUrl(s.to_owned()))
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.redacted())
    }
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let s: Secret = "hunter2".parse().unwrap();
        assert_eq!(s.expose(), "hunter2");
        assert!(!format!("{s:?}").contains("hunter2"));
        let url = DatabaseUrl::from("postgres://app:hunter2@db:5432/sagents");
        assert_eq!(&*url, "postgres://app:hunter2@db:5432/sagents");
        assert!(!format!("{url:?} {url}").contains("hunter2"));
        assert!(format!("{url}").contains("app:***@db"));
        let plain = DatabaseUrl::from("sqlite://data/sagents.db");
        assert_eq!(plain.to_string(), "sqlite://data/sagents.db");
    }
}
