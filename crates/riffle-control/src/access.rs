//! Who may do what at the control endpoint. Reading (metrics, the API, the page) is open
//! on loopback to requests for a loopback host; changing the job (a savepoint, a stop)
//! needs the job's token even there, and an endpoint bound to another address needs the
//! token for every request. The host check keeps web pages of other sites out: a page
//! whose name an attacker re-points at 127.0.0.1 (DNS rebinding) sends its own name.

/// A request the endpoint refuses, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// No token was presented.
    #[error("this request needs the job's token: send `Authorization: Bearer <token>` (the token is in {{state}}/{{pipeline}}/_control_token)")]
    MissingToken,
    /// A token was presented and is not the job's.
    #[error("the token is not this job's")]
    WrongToken,
    /// A request without the token named a host that is not this machine's loopback.
    #[error("this endpoint answers requests for localhost, 127.0.0.1 or [::1] without a token; this one named another host (a web page of another site, re-pointed here?): send the job's token to read it by another name")]
    ForeignHost,
}

/// The endpoint's access rule.
#[derive(Clone)]
pub struct Access {
    token: String,
    open_to_network: bool,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("Access")
            .field("open_to_network", &self.open_to_network)
            .finish_non_exhaustive()
    }
}

impl Access {
    /// The rule for an endpoint bound to `address` with `token`.
    pub fn new(token: String, address: std::net::SocketAddr) -> Self {
        Self {
            token,
            open_to_network: !address.ip().is_loopback(),
        }
    }

    /// Whether every request needs the token.
    pub fn open_to_network(&self) -> bool {
        self.open_to_network
    }

    /// Decides one request: `changes_job` for actions (savepoint, stop), `presented`
    /// the token it carries, `host` its `Host` header.
    ///
    /// # Errors
    /// [`Denied`] when the request needs the token and does not carry it, or reads on
    /// loopback by another host's name.
    pub fn check(
        &self,
        changes_job: bool,
        presented: Option<&str>,
        host: Option<&str>,
    ) -> Result<(), Denied> {
        let token = presented.map(|t| same_secret(t.as_bytes(), self.token.as_bytes()));
        if !changes_job && !self.open_to_network {
            return match token == Some(true) || host.is_some_and(is_loopback_host) {
                true => Ok(()),
                false => Err(Denied::ForeignHost),
            };
        }
        match token {
            None => Err(Denied::MissingToken),
            Some(true) => Ok(()),
            Some(false) => Err(Denied::WrongToken),
        }
    }
}

/// Whether a `Host` header names this machine's loopback: `localhost`, `127.0.0.1`,
/// `[::1]`, with or without a port.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        },
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Compares two secrets in time that depends on their lengths only, so that timing
/// does not tell how much of a guess was right.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The token in an `Authorization: Bearer <token>` header value.
pub fn bearer(header: Option<&str>) -> Option<&str> {
    header?
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// A fresh token: 128 random bits from the operating system, as 32 hex digits.
///
/// # Errors
/// The operating system has no randomness to give.
pub fn new_token() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for the control token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(address: &str) -> Access {
        Access::new("secret-1".into(), address.parse().unwrap())
    }

    const LOCAL: Option<&str> = Some("127.0.0.1:8081");

    #[test]
    fn on_loopback_reading_needs_no_token() {
        assert_eq!(at("127.0.0.1:8081").check(false, None, LOCAL), Ok(()));
        assert_eq!(
            at("[::1]:8081").check(false, None, Some("[::1]:8081")),
            Ok(())
        );
        assert_eq!(
            at("127.0.0.1:8081").check(false, None, Some("localhost:8081")),
            Ok(())
        );
        assert_eq!(
            at("127.0.0.1:8081").check(false, None, Some("LOCALHOST")),
            Ok(())
        );
    }

    #[test]
    fn on_loopback_reading_by_another_hosts_name_needs_the_token() {
        // DNS rebinding: attacker.example re-pointed at 127.0.0.1.
        let access = at("127.0.0.1:8081");
        for host in [
            Some("attacker.example"),
            Some("attacker.example:8081"),
            Some("10.0.0.5:8081"),
            Some("localhost.attacker.example"),
            None,
        ] {
            assert_eq!(
                access.check(false, None, host),
                Err(Denied::ForeignHost),
                "{host:?}"
            );
        }
        assert_eq!(
            access.check(false, Some("secret-1"), Some("attacker.example")),
            Ok(())
        );
    }

    #[test]
    fn on_loopback_changing_the_job_needs_the_token() {
        let access = at("127.0.0.1:8081");
        assert_eq!(access.check(true, None, LOCAL), Err(Denied::MissingToken));
        assert_eq!(
            access.check(true, Some("guess"), LOCAL),
            Err(Denied::WrongToken)
        );
        assert_eq!(access.check(true, Some("secret-1"), LOCAL), Ok(()));
    }

    #[test]
    fn open_to_the_network_every_request_needs_the_token() {
        let access = at("0.0.0.0:8081");
        assert!(access.open_to_network());
        assert_eq!(access.check(false, None, LOCAL), Err(Denied::MissingToken));
        assert_eq!(
            access.check(false, Some("secret-2"), LOCAL),
            Err(Denied::WrongToken)
        );
        assert_eq!(
            access.check(false, Some("secret-1"), Some("riffle-0.riffle:8081")),
            Ok(())
        );
        assert_eq!(access.check(true, Some("secret-1"), None), Ok(()));
    }

    #[test]
    fn a_bearer_header_gives_its_token() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(Some("Bearer ")), None);
        assert_eq!(bearer(None), None);
    }

    #[test]
    fn tokens_are_fresh_and_32_hex_digits() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn the_token_is_never_in_debug_output() {
        assert!(!format!("{:?}", at("127.0.0.1:1")).contains("secret-1"));
    }
}
