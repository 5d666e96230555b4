//! Who may read what `serve` serves: the token, the browser's way in, and
//! the Host check of a server that has neither.
//!
//! - With a token, a request is let in by `Authorization: Bearer <token>`
//!   (scripts, Prometheus, the fleet view) or by the session cookie a
//!   browser got from the sign-in form. A browser cannot send a bearer
//!   header on its first load, and a token in a URL would be logged: so an
//!   unauthenticated `GET /` is answered with a form, posted to `/login`,
//!   that sets an `HttpOnly; SameSite=Strict` cookie. The cookie's value is
//!   not the token but a random secret of this run: it dies with the
//!   server, never shows the token to the page, and other sites' pages
//!   never send it.
//! - Without a token the server listens on loopback only
//!   ([`super::auth_for`]), but a page on any site can still reach
//!   loopback by DNS rebinding: its own name, re-pointed at 127.0.0.1. Such
//!   a request carries that name as its Host, so a server without a token
//!   answers only requests whose Host is a loopback name or address.

use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most a sign-in form may be: `token=` and a token of a few hundred
/// characters, percent-encoded.
pub const FORM_LIMIT: usize = 2048;

/// Wrong tokens taken per [`TRIES_WINDOW`], from every client together.
/// Past that a form is refused unread until the window ends: a guesser
/// gets a few tries a second, never thousands, and no connection is held
/// to slow it (a held slot would be one a scraper cannot have).
const TRIES_PER_WINDOW: u32 = 5;
const TRIES_WINDOW: Duration = Duration::from_secs(1);

/// Why a sign-in did not give a cookie.
#[derive(Debug, PartialEq)]
pub enum Refused {
    WrongToken,
    /// Over [`TRIES_PER_WINDOW`]: the form was not looked at.
    TooManyTries,
}

/// A secret every request must present as `Authorization: Bearer <token>`.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl Token {
    pub fn new(token: &str) -> Token {
        Token(token.as_bytes().to_vec())
    }

    /// Compares in time that depends on the token's length only, never on
    /// where the first differing byte is.
    pub fn matches(&self, given: &[u8]) -> bool {
        let mut diff = (self.0.len() != given.len()) as u8;
        for (i, &b) in self.0.iter().enumerate() {
            // Reading past the end of a shorter guess compares with 0; the
            // length check above already failed it.
            let g = given.get(i).copied().unwrap_or(0);
            diff |= std::hint::black_box(b ^ g);
        }
        std::hint::black_box(diff) == 0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// The token and this run's session cookie.
pub struct Access {
    token: Token,
    /// `gputaskman_session_<port>`: browsers keep cookies per host, not per
    /// port, so two servers on one host would otherwise sign each other out.
    cookie_name: String,
    session: String,
    session_token: Token,
    /// The current window's start and its wrong tokens.
    tries: Mutex<(Instant, u32)>,
}

impl Access {
    pub fn new(token: Token, port: u16) -> std::io::Result<Access> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| std::io::Error::other(format!("no random session secret: {e}")))?;
        let session: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Access {
            token,
            cookie_name: format!("gputaskman_session_{port}"),
            session_token: Token::new(&session),
            session,
            tries: Mutex::new((Instant::now(), 0)),
        })
    }

    /// Whether the request carries exactly one bearer header with the
    /// token, or (with no bearer header) this run's session cookie.
    pub fn admits(&self, authorization: &[&str], cookies: &[&str]) -> bool {
        if !authorization.is_empty() {
            return bearer(&self.token, authorization);
        }
        let mut given = cookies.iter().flat_map(|c| c.split(';')).filter_map(|pair| {
            let (name, value) = pair.split_once('=')?;
            (name.trim() == self.cookie_name).then(|| value.trim())
        });
        match (given.next(), given.next()) {
            (Some(value), None) => self.session_token.matches(value.as_bytes()),
            _ => false,
        }
    }
    /// A sign-in form's answer: the `Set-Cookie` value of the session when
    /// the form holds the token.
    pub fn login(&self, form: &[u8]) -> Result<String, Refused> {
        let mut tries = self.tries.lock().unwrap_or_else(|e| e.into_inner());
        if tries.0.elapsed() >= TRIES_WINDOW {
            *tries = (Instant::now(), 0);
        }
        if tries.1 >= TRIES_PER_WINDOW {
            return Err(Refused::TooManyTries);
        }
        if form_field(form, "token").is_some_and(|t| self.token.matches(t.as_bytes())) {
            return Ok(format!(
                "{}={}; Path=/; HttpOnly; SameSite=Strict",
                self.cookie_name, self.session
            ));
        }
        tries.1 += 1;
        Err(Refused::WrongToken)
    }
}

/// The sign-in form, with a line saying the last try was wrong.
pub fn sign_in_page(failed: bool) -> String {
    if failed {
        SIGN_IN.replace(
            "<!-- failed -->",
            "<p id=\"failed\">That is not this server's token.</p>",
        )
    } else {
        SIGN_IN.to_string()
    }
}

const SIGN_IN: &str = include_str!("web/sign-in.html");

/// Whether `authorization` is exactly one `Bearer` header with the token.
pub fn bearer(token: &Token, authorization: &[&str]) -> bool {
    let [value] = authorization else { return false };
    let Some((scheme, credentials)) = value.split_once(' ') else {
        return false;
    };
    scheme.eq_ignore_ascii_case("bearer") && token.matches(credentials.trim_start_matches(' ').as_bytes())
}

/// The first value of `name` in an `application/x-www-form-urlencoded`
/// body, decoded; None when absent or not UTF-8.
fn form_field(form: &[u8], name: &str) -> Option<String> {
    let form = std::str::from_utf8(form).ok()?;
    form.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if key != name {
            return None;
        }
        let value = value.replace('+', " ");
        percent_encoding::percent_decode_str(&value)
            .decode_utf8()
            .ok()
            .map(|v| v.into_owned())
    })
}

/// Whether a Host header names this machine's loopback: `localhost` (or a
/// name under it), or a loopback address, with or without a port. A
/// request without one (HTTP/1.0) is let through: a browser always sends
/// it.
pub fn loopback_host(host: Option<&str>) -> bool {
    let Some(host) = host else { return true };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                name
            } else {
                host
            }
        }),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.to_canonical().is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access() -> Access {
        Access::new(Token::new("s3cret-token-value"), 9464).unwrap()
    }

    fn cookie_of(set: &str) -> String {
        set.split(';').next().unwrap().to_string()
    }

    #[test]
    fn the_form_with_the_token_gives_a_cookie_that_lets_in() {
        let a = access();
        let set = a.login(b"token=s3cret-token-value").expect("signed in");
        let cookie = cookie_of(&set);
        assert!(cookie.starts_with("gputaskman_session_9464="), "{cookie}");
        assert!(!cookie.contains("s3cret"), "the cookie is not the token: {cookie}");
        assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"), "{set}");
        assert!(a.admits(&[], &[&cookie]));
        assert!(a.admits(&[], &[&format!("other=1; {cookie}")]));
        // Another run's cookie, a doubled one, or none do not.
        let other_run = access().login(b"token=s3cret-token-value").unwrap();
        assert!(!a.admits(&[], &[&cookie_of(&other_run)]));
        assert!(!a.admits(&[], &[&format!("{cookie}; {cookie}")]));
        assert!(!a.admits(&[], &[]));
        // A bearer header is judged alone, cookie or not.
        assert!(a.admits(&["Bearer s3cret-token-value"], &[]));
        assert!(!a.admits(&["Bearer wrong"], &[&cookie]));
    }

    #[test]
    fn a_wrong_or_missing_token_gets_no_cookie() {
        let a = access();
        for form in [
            &b"token=wrong"[..],
            b"",
            b"tok=s3cret-token-value",
            b"token=s3cret-token-valu",
            b"\xff",
        ] {
            assert_eq!(a.login(form), Err(Refused::WrongToken), "{form:?}");
            std::thread::sleep(TRIES_WINDOW / 4);
        }
    }

    #[test]
    fn past_a_few_wrong_tokens_a_second_even_the_right_one_waits() {
        let a = access();
        for _ in 0..TRIES_PER_WINDOW {
            assert_eq!(a.login(b"token=guess"), Err(Refused::WrongToken));
        }
        assert_eq!(a.login(b"token=s3cret-token-value"), Err(Refused::TooManyTries));
        std::thread::sleep(TRIES_WINDOW);
        assert!(a.login(b"token=s3cret-token-value").is_ok());
    }

    #[test]
    fn only_a_failed_try_says_so_on_the_form() {
        assert!(sign_in_page(true).contains("id=\"failed\""));
        assert!(!sign_in_page(false).contains("id=\"failed\""));
        assert!(sign_in_page(false).contains("action=\"login\""));
    }

    #[test]
    fn form_fields_are_percent_decoded() {
        assert_eq!(form_field(b"a=1&token=x%2By+z", "token").as_deref(), Some("x+y z"));
        assert_eq!(form_field(b"token", "token").as_deref(), Some(""));
        assert_eq!(form_field(b"token=%ff", "token"), None);
        assert_eq!(form_field(b"x=1", "token"), None);
    }

    #[test]
    fn only_loopback_names_pass_the_host_check() {
        for ok in [
            None,
            Some("127.0.0.1:9464"),
            Some("127.1.2.3"),
            Some("localhost:9464"),
            Some("LOCALHOST."),
            Some("app.localhost:80"),
            Some("[::1]:9464"),
            Some("[::ffff:127.0.0.1]"),
        ] {
            assert!(loopback_host(ok), "{ok:?}");
        }
        for no in [
            Some("evil.example:9464"),
            Some("localhost.evil.example"),
            Some("10.0.0.1:9464"),
            Some("[2001:db8::1]:80"),
            Some(""),
            Some("127.0.0.1.evil.example"),
        ] {
            assert!(!loopback_host(no), "{no:?}");
        }
    }
}
