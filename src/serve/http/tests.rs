//! The bounded server's own tests: parsing, authentication, deadlines
//! and the connection cap, over loopback.

use super::*;

pub(crate) struct Fixed(pub Arc<Vec<u8>>);

impl Handler for Fixed {
    fn get(&self, path: &str) -> Option<Response> {
        (path == "/snapshot").then(|| Response::new(200, "application/json", Body::Shared(self.0.clone())))
    }
}

fn limits() -> Limits {
    Limits::default()
}

#[test]
fn tokens_compare_whole() {
    let t = Token::new("s3cret-token");
    assert!(t.matches(b"s3cret-token"));
    assert!(!t.matches(b"s3cret-tokem"));
    assert!(!t.matches(b"s3cret-token2"));
    assert!(!t.matches(b"s3cret"));
    assert!(!t.matches(b""));
    assert_eq!(format!("{t:?}"), "Token(<redacted>)");
}

#[test]
fn bearer_scheme_is_case_insensitive_and_single() {
    let t = Token::new("abc");
    assert!(access::bearer(&t, &["Bearer abc"]));
    assert!(access::bearer(&t, &["bearer abc"]));
    assert!(!access::bearer(&t, &["Basic abc"]));
    assert!(!access::bearer(&t, &["Bearer abc", "Bearer abc"]));
    assert!(!access::bearer(&t, &[]));
    assert!(!access::bearer(&t, &["Bearer"]));
}

#[test]
fn parse_takes_the_path_and_ignores_the_query() {
    let r = parse(
        b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer t\r\n\r\n",
        &limits(),
    )
    .unwrap();
    assert_eq!(r.method, "GET");
    assert_eq!(r.path, "/metrics");
    assert_eq!(r.authorization, ["Bearer t"]);
    assert!(!r.has_body);
}

#[test]
fn parse_refuses_what_it_does_not_serve() {
    let l = limits();
    assert_eq!(parse(b"GET /x HTTP/2.0\r\n\r\n", &l), Err(505));
    assert_eq!(parse(b"GET http://a/x HTTP/1.1\r\n\r\n", &l), Err(400));
    assert_eq!(parse(b"GET  /x HTTP/1.1\r\n\r\n", &l), Err(400));
    assert_eq!(parse(b"get /x HTTP/1.1\r\n\r\n", &l), Err(400));
    assert_eq!(parse(b"GET /x HTTP/1.1\r\nbad header\r\n\r\n", &l), Err(400));
    assert_eq!(parse(b"GET /x HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", &l), Err(400));
    let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(3000));
    assert_eq!(parse(long.as_bytes(), &l), Err(414));
    let many = format!("GET / HTTP/1.1\r\n{}\r\n", "A: b\r\n".repeat(65));
    assert_eq!(parse(many.as_bytes(), &l), Err(431));
    let body = parse(b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n", &l).unwrap();
    assert!(body.has_body);
    let chunked = parse(b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &l).unwrap();
    assert!(chunked.has_body);
    assert!(
        !parse(b"GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &l)
            .unwrap()
            .has_body
    );
}

#[test]
fn head_ends_at_the_blank_line() {
    assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nbody"), Some(18));
    assert_eq!(head_end(b"GET / HTTP/1.1\n\n"), Some(16));
    assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n"), None);
}

fn get(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serves_over_loopback_and_stops() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let body = Arc::new(b"{\"a\":1}".to_vec());
    let handle = Server::new(
        listener,
        limits(),
        Some(Token::new("t0ken")),
        None,
        Arc::new(Fixed(body)),
    )
    .unwrap()
    .spawn()
    .unwrap();
    let addr = handle.addr();
    let ok = get(addr, b"GET /snapshot HTTP/1.1\r\nAuthorization: Bearer t0ken\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(ok.ends_with("\r\n\r\n{\"a\":1}"), "{ok}");
    let no = get(addr, b"GET /snapshot HTTP/1.1\r\n\r\n");
    assert!(no.starts_with("HTTP/1.1 401 "), "{no}");
    assert!(!no.contains("{\"a\""));
    let post = get(addr, b"POST /snapshot HTTP/1.1\r\nAuthorization: Bearer t0ken\r\n\r\n");
    assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
    assert!(post.contains("Allow: GET\r\n"));
    let missing = get(addr, b"GET /nothing HTTP/1.1\r\nAuthorization: Bearer t0ken\r\n\r\n");
    assert!(missing.starts_with("HTTP/1.1 404 "), "{missing}");
    handle.stop();
    assert!(TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err());
}

#[test]
fn a_head_that_never_ends_times_out() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let limits = Limits {
        read_deadline: Duration::from_millis(300),
        ..Limits::default()
    };
    let handle = Server::new(listener, limits, None, None, Arc::new(Fixed(Arc::new(vec![]))))
        .unwrap()
        .spawn()
        .unwrap();
    let started = Instant::now();
    let out = get(handle.addr(), b"GET /snapshot HTTP/1.1\r\n");
    assert!(out.starts_with("HTTP/1.1 408 "), "{out}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

/// A client that asks for a large answer and never reads it frees its
/// slot once the answer stalls, long before the write deadline: the
/// slots a scraper needs are not held by clients that do not read.
#[test]
fn a_client_that_never_reads_frees_its_slot_when_the_answer_stalls() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let limits = Limits {
        write_stall: Duration::from_millis(300),
        ..Limits::default()
    };
    // Far more than loopback's socket buffers take without a read.
    let body = Arc::new(vec![b'x'; 64 << 20]);
    let handle = Server::new(listener, limits, None, None, Arc::new(Fixed(body)))
        .unwrap()
        .spawn()
        .unwrap();
    let mut idle = TcpStream::connect(handle.addr()).unwrap();
    idle.write_all(b"GET /snapshot HTTP/1.1\r\n\r\n").unwrap();
    let started = Instant::now();
    while handle.shared.live_connections() == 0 && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    while handle.shared.live_connections() > 0 && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let held = started.elapsed();
    assert_eq!(handle.shared.live_connections(), 0, "still held after {held:?}");
    assert!(held < Duration::from_secs(5), "held {held:?}, not cut at the stall");
    drop(idle);
}

/// Answers after `0` (every slot busy with a complete request).
struct Slow(Duration);

impl Handler for Slow {
    fn get(&self, _: &str) -> Option<Response> {
        std::thread::sleep(self.0);
        Some(Response::text(200, "slow\n"))
    }
}

#[test]
fn over_the_connection_cap_answers_503_at_once() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let limits = Limits {
        max_connections: 2,
        ..Limits::default()
    };
    let handle = Server::new(
        listener,
        limits,
        None,
        None,
        Arc::new(Slow(Duration::from_millis(1500))),
    )
    .unwrap()
    .spawn()
    .unwrap();
    let addr = handle.addr();
    let busy: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(move || get(addr, b"GET /snapshot HTTP/1.1\r\n\r\n")))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let out = get(addr, b"GET /snapshot HTTP/1.1\r\n\r\n");
    assert!(out.starts_with("HTTP/1.1 503 "), "{out}");
    assert!(
        started.elapsed() < Duration::from_millis(1000),
        "{:?}",
        started.elapsed()
    );
    for b in busy {
        assert!(b.join().unwrap().starts_with("HTTP/1.1 200 "));
    }
}

#[test]
fn at_the_cap_an_idle_connection_gives_way_to_a_request() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let limits = Limits {
        max_connections: 2,
        ..Limits::default()
    };
    let handle = Server::new(listener, limits, None, None, Arc::new(Fixed(Arc::new(vec![]))))
        .unwrap()
        .spawn()
        .unwrap();
    for _ in 0..20 {
        let idle: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(handle.addr()).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(50));
        let out = get(handle.addr(), b"GET /snapshot HTTP/1.1\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
        drop(idle);
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The header `name` of a raw reply, if any.
fn header<'a>(reply: &'a str, name: &str) -> Option<&'a str> {
    let head = reply.split("\r\n\r\n").next().unwrap_or("");
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn login(addr: SocketAddr, form: &str) -> String {
    let request = format!(
        "POST /login HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\n\r\n{form}",
        form.len()
    );
    get(addr, request.as_bytes())
}

#[test]
fn a_browser_signs_in_with_the_form_and_reads_with_its_cookie() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let body = Arc::new(b"{\"a\":1}".to_vec());
    let handle = Server::new(
        listener,
        limits(),
        Some(Token::new("t0ken-t0ken-t0ken")),
        None,
        Arc::new(Fixed(body)),
    )
    .unwrap()
    .spawn()
    .unwrap();
    let addr = handle.addr();
    // The page's first load: the form, and nothing of the server's.
    let page = get(addr, b"GET / HTTP/1.1\r\n\r\n");
    assert!(page.starts_with("HTTP/1.1 401 "), "{page}");
    assert_eq!(header(&page, "Content-Type"), Some("text/html; charset=utf-8"));
    assert!(page.contains("<form method=\"post\" action=\"login\">"), "{page}");
    assert!(!page.contains("id=\"failed\""));
    let csp = header(&page, "Content-Security-Policy").expect("a CSP");
    assert!(
        csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    // Any other path stays shut without a token.
    assert!(get(addr, b"GET /snapshot HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 401 "));

    let wrong = login(addr, "token=guess");
    assert!(wrong.starts_with("HTTP/1.1 401 "), "{wrong}");
    assert!(wrong.contains("id=\"failed\"") && header(&wrong, "Set-Cookie").is_none());

    let ok = login(addr, "token=t0ken-t0ken-t0ken");
    assert!(ok.starts_with("HTTP/1.1 303 "), "{ok}");
    assert_eq!(header(&ok, "Location"), Some("./"));
    let cookie = header(&ok, "Set-Cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let with_cookie = format!("GET /snapshot HTTP/1.1\r\nCookie: {cookie}\r\n\r\n");
    let read = get(addr, with_cookie.as_bytes());
    assert!(
        read.starts_with("HTTP/1.1 200 ") && read.ends_with("{\"a\":1}"),
        "{read}"
    );
    // The cookie is no way around a wrong bearer header.
    let both = format!("GET /snapshot HTTP/1.1\r\nCookie: {cookie}\r\nAuthorization: Bearer no\r\n\r\n");
    assert!(get(addr, both.as_bytes()).starts_with("HTTP/1.1 401 "));
}

#[test]
fn the_sign_in_form_is_bounded() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let handle = Server::new(
        listener,
        limits(),
        Some(Token::new("t")),
        None,
        Arc::new(Fixed(Arc::new(vec![]))),
    )
    .unwrap()
    .spawn()
    .unwrap();
    let addr = handle.addr();
    let big = format!("token={}", "a".repeat(access::FORM_LIMIT));
    assert!(login(addr, &big).starts_with("HTTP/1.1 413 "));
    let chunked = get(
        addr,
        b"POST /login HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
    );
    assert!(chunked.starts_with("HTTP/1.1 411 "), "{chunked}");
    // A body that never comes whole ends at the request's deadline.
    let started = Instant::now();
    let short = get(addr, b"POST /login HTTP/1.1\r\nContent-Length: 100\r\n\r\ntoken=t");
    assert!(short.starts_with("HTTP/1.1 408 "), "{short}");
    assert!(started.elapsed() < Duration::from_secs(4));
    // Only the form takes a POST.
    let other = get(
        addr,
        b"POST /snapshot HTTP/1.1\r\nAuthorization: Bearer t\r\nContent-Length: 0\r\n\r\n",
    );
    assert!(other.starts_with("HTTP/1.1 405 "), "{other}");
}

#[test]
fn without_a_token_only_a_loopback_host_is_answered() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let body = Arc::new(b"{}".to_vec());
    let handle = Server::new(listener, limits(), None, None, Arc::new(Fixed(body)))
        .unwrap()
        .spawn()
        .unwrap();
    let addr = handle.addr();
    let ok = get(
        addr,
        format!("GET /snapshot HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes(),
    );
    assert!(ok.starts_with("HTTP/1.1 200 "), "{ok}");
    let local = get(addr, b"GET /snapshot HTTP/1.1\r\nHost: localhost:9464\r\n\r\n");
    assert!(local.starts_with("HTTP/1.1 200 "), "{local}");
    // A page of another site whose name now points at 127.0.0.1.
    let rebound = get(addr, b"GET /snapshot HTTP/1.1\r\nHost: attacker.example:9464\r\n\r\n");
    assert!(rebound.starts_with("HTTP/1.1 403 "), "{rebound}");
    assert!(!rebound.ends_with("{}"));
    let two = get(
        addr,
        b"GET /snapshot HTTP/1.1\r\nHost: localhost\r\nHost: attacker.example\r\n\r\n",
    );
    assert!(two.starts_with("HTTP/1.1 400 "), "{two}");
    // No form to post to without a token.
    assert!(login(addr, "token=x").starts_with("HTTP/1.1 405 "));
}

/// `--insecure-no-auth` on another address: its clients reach it by any
/// name. (Bound to 0.0.0.0 and asked over loopback, as a LAN client would
/// with its own Host.)
#[test]
fn a_server_on_another_address_answers_any_host() {
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = Server::new(
        listener,
        limits(),
        None,
        None,
        Arc::new(Fixed(Arc::new(b"{}".to_vec()))),
    )
    .unwrap()
    .spawn()
    .unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let lan = get(addr, b"GET /snapshot HTTP/1.1\r\nHost: gpu-box.lan:9464\r\n\r\n");
    assert!(lan.starts_with("HTTP/1.1 200 "), "{lan}");
    drop(handle);
}
