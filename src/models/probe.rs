//! The only network code in gputaskman: GET requests to a runtime's API on
//! the loopback interface, with a short timeout, a bounded body, no proxy and
//! no redirects.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// How long one request may take, connection included.
pub const TIMEOUT: Duration = Duration::from_millis(250);
/// The largest body read; runtimes' answers are a few KiB.
pub const BODY_LIMIT: u64 = 1 << 20;

pub struct Prober {
    agent: ureq::Agent,
}

/// The HTTP client of the runtime probes and of `--remote`: requests
/// bounded by `timeout` in all, connection included.
pub fn agent(timeout: Duration) -> ureq::Agent {
    agent_config(timeout).build().into()
}

/// [`agent`]'s settings, for an agent that needs one more (TLS).
pub fn agent_config(timeout: Duration) -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope> {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        // A redirect could point anywhere: never followed.
        .max_redirects(0)
        // The environment's HTTP proxy must not see loopback probes, nor
        // the token sent to a remote host.
        .proxy(None)
        .http_status_as_error(false)
        .user_agent("gputaskman")
}

impl Default for Prober {
    fn default() -> Self {
        Prober { agent: agent(TIMEOUT) }
    }
}

impl Prober {
    /// GET `path` from a loopback address. Anything but 200 with a body
    /// under [`BODY_LIMIT`] is an error in words.
    pub fn get(&self, addr: SocketAddr, path: &str, api_key: Option<&str>) -> Result<Vec<u8>, String> {
        if !addr.ip().is_loopback() {
            return Err(format!("{addr} is not a loopback address: not probed"));
        }
        let url = format!("http://{addr}{path}");
        let mut request = self.agent.get(&url);
        if let Some(key) = api_key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let mut response = request.call().map_err(|e| format!("GET {path}: {e}"))?;
        let status = response.status();
        if status != 200 {
            return Err(format!("GET {path}: HTTP {}", status.as_u16()));
        }
        response
            .body_mut()
            .with_config()
            .limit(BODY_LIMIT)
            .read_to_vec()
            .map_err(|e| format!("GET {path}: {e}"))
    }
}

/// The loopback address to probe for a listening socket, if any: a socket
/// bound to every interface is reached on loopback; one bound to another
/// address only is not probed at all.
pub fn loopback_for(listen: SocketAddr) -> Option<SocketAddr> {
    let ip: IpAddr = match listen.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() || v4.is_loopback() => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() || v6.is_loopback() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        _ => return None,
    };
    Some(SocketAddr::new(ip, listen.port()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A one-shot server answering every connection with `response`.
    fn serve(response: &'static [u8], connections: usize) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(connections) {
                let mut stream = stream.unwrap();
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = stream.write_all(response);
            }
        });
        addr
    }

    #[test]
    fn a_redirect_is_never_followed() {
        let addr = serve(
            b"HTTP/1.1 302 Found\r\nLocation: http://192.0.2.1/x\r\nContent-Length: 0\r\n\r\n",
            1,
        );
        let err = Prober::default().get(addr, "/props", None).unwrap_err();
        assert_eq!(err, "GET /props: HTTP 302");
    }

    #[test]
    fn a_body_over_the_limit_is_an_error() {
        let addr = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\n\r\n", 1);
        assert!(Prober::default().get(addr, "/props", None).is_err());
    }

    #[test]
    fn a_server_that_never_answers_times_out_quickly() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let started = std::time::Instant::now();
        let err = Prober::default().get(addr, "/props", None).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2), "{err}");
        drop(listener);
    }

    #[test]
    fn only_loopback_is_probed() {
        let err = Prober::default()
            .get("192.0.2.1:80".parse().unwrap(), "/", None)
            .unwrap_err();
        assert!(err.contains("not a loopback address"));
        assert_eq!(
            loopback_for("0.0.0.0:8080".parse().unwrap()),
            Some("127.0.0.1:8080".parse().unwrap())
        );
        assert_eq!(
            loopback_for("[::]:8080".parse().unwrap()),
            Some("[::1]:8080".parse().unwrap())
        );
        assert_eq!(loopback_for("10.0.0.5:8080".parse().unwrap()), None);
    }

    #[test]
    fn the_api_key_is_sent_as_a_bearer_token() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).unwrap();
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}").unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        let body = Prober::default().get(addr, "/props", Some("k3y")).unwrap();
        assert_eq!(body, b"{}");
        let request = seen.join().unwrap();
        assert!(request.starts_with("GET /props HTTP/1.1"), "{request}");
        assert!(
            request.contains("authorization: Bearer k3y") || request.contains("Authorization: Bearer k3y"),
            "{request}"
        );
    }
}
