//! `SAGENTS_CORS_ORIGINS`: the browser origins allowed to call the API from another origin.

/// One origin as a browser sends it in `Origin`: `scheme://host[:port]`, nothing after.
/// An empty item (an unset variable passed on as empty) is kept and means none.
pub fn parse_origin(value: &str) -> Result<String, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(String::new());
    }
    let rest = value
        .strip_prefix("https://")
        .or_else(|| value.strip_prefix("http://"))
        .ok_or_else(|| format!("{value:?}: an origin starts with http:// or https://"))?;
    let plain = !rest.is_empty()
        && rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    if !plain {
        return Err(format!(
            "{value:?}: an origin is scheme://host[:port], without a path or a trailing slash"
        ));
    }
    Ok(value.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::parse_origin;

    #[test]
    fn an_origin_is_a_scheme_a_host_and_maybe_a_port() {
        assert_eq!(
            parse_origin("https://App.example.com").unwrap(),
            "https://app.example.com"
        );
        assert!(parse_origin("http://localhost:5173").is_ok());
        assert_eq!(parse_origin(" ").unwrap(), "");
        for bad in [
            "example.com",
            "https://",
            "https://a.com/",
            "https://a.com/x",
            "*",
        ] {
            assert!(parse_origin(bad).is_err(), "{bad}");
        }
    }
}
