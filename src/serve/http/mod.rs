//! A deliberately small HTTP/1.1 server: GET of a few fixed paths, one
//! request per connection, every resource bounded.
//!
//! Written on std rather than on tiny_http because what matters here is the
//! bounds, and tiny_http offers none of them as settings: it has no deadline
//! for reading a request (a per-read timeout lets a client that trickles a
//! byte at a time hold a connection forever), no bound on header count or
//! size, and no cap on concurrent connections (its pool grows a thread per
//! waiting client). What is needed is little: read one request head under a
//! size, count and time limit, answer from memory, close.
//!
//! - The head (request line and headers) must arrive whole within
//!   [`Limits::read_deadline`] of the connection being accepted, in at most
//!   [`Limits::max_head_bytes`] with at most [`Limits::max_headers`] headers.
//!   A request with a body (`Content-Length` other than 0, or
//!   `Transfer-Encoding`) is refused: no path takes one.
//! - At most [`Limits::max_connections`] connections are served at once,
//!   each on a thread of its own with a small stack. A client still
//!   sending its head is the cheap one to drop: from three quarters of the
//!   cap on, each new connection cuts the oldest of those (with `503`),
//!   taken from the client address that has the most of them, so clients
//!   that trickle heads (a slow loris, loopback or not) cost a bounded
//!   number of threads, never the slot of a scraper that sends its head at
//!   once. Only when every slot is answering a complete request does a new
//!   connection get `503` at once.
//! - With a token, every request needs `Authorization: Bearer <token>`
//!   or the browser's session cookie, compared in constant time, before
//!   anything else is looked at; the one exception is the sign-in form,
//!   a `POST /login` of at most [`access::FORM_LIMIT`] bytes
//!   (src/serve/access.rs). Without a token, only requests whose Host is
//!   a loopback name are answered (DNS rebinding).
//! - Otherwise only GET; the answer depends on the path alone (the query
//!   string and every header but `Authorization`, `Cookie` and `Host` are
//!   ignored).

pub use super::access::Token;
use super::access::{self, Access};
use conn::Conn;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Limits {
    /// Request line and headers together, in bytes.
    pub max_head_bytes: usize,
    pub max_headers: usize,
    /// The request target (path and query), in bytes.
    pub max_target_bytes: usize,
    /// From accept to the end of the request head.
    pub read_deadline: Duration,
    /// For the whole response.
    pub write_deadline: Duration,
    /// The longest a response may make no progress: a client that sends
    /// its request and never reads a large answer holds its slot this long,
    /// not the whole [`Limits::write_deadline`].
    pub write_stall: Duration,
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_head_bytes: 8 * 1024,
            max_headers: 64,
            max_target_bytes: 2 * 1024,
            // A head is a few hundred bytes: any client not on a dead link
            // sends it in milliseconds.
            read_deadline: Duration::from_secs(2),
            write_deadline: Duration::from_secs(30),
            // The kernel takes what a reading client's window allows at
            // once; two seconds without room for one more byte is a client
            // that does not read (or a dead link).
            write_stall: Duration::from_secs(2),
            // Answers come from memory in microseconds; 64 at once is far
            // above what Prometheus and a few fleet views need, and 64
            // small-stack threads are what a flood can cost at most.
            max_connections: 64,
        }
    }
}

pub enum Body {
    Static(&'static str),
    Owned(String),
    Shared(Arc<Vec<u8>>),
}

impl Body {
    fn bytes(&self) -> &[u8] {
        match self {
            Body::Static(s) => s.as_bytes(),
            Body::Owned(s) => s.as_bytes(),
            Body::Shared(b) => b,
        }
    }
}

pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Body,
    /// Headers beyond those every answer has (`Set-Cookie`, `Location`).
    pub headers: Vec<(&'static str, String)>,
}

impl Response {
    pub fn new(status: u16, content_type: &'static str, body: Body) -> Response {
        Response {
            status,
            content_type,
            body,
            headers: Vec::new(),
        }
    }

    pub fn text(status: u16, body: &'static str) -> Response {
        Response::new(status, "text/plain; charset=utf-8", Body::Static(body))
    }

    pub fn with_header(mut self, name: &'static str, value: String) -> Response {
        self.headers.push((name, value));
        self
    }
}

/// On every answer. The page's script and styles come from this server
/// alone, no frame may hold it, and nothing it loads learns where from.
const SECURITY_HEADERS: &str = "Content-Security-Policy: default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; \
     frame-ancestors 'none'\r\nX-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n";

/// What the server serves: the answer to a GET of a path, or None (404).
pub trait Handler: Send + Sync + 'static {
    fn get(&self, path: &str) -> Option<Response>;
}

pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

struct Shared {
    limits: Limits,
    /// The token and the session cookie; None: no authentication.
    access: Option<Access>,
    /// No token and a loopback address: only loopback Host names are
    /// answered. (`--insecure-no-auth` on another address is reached by
    /// whatever name its clients use, as its user chose.)
    loopback_hosts_only: bool,
    /// HTTPS: every connection speaks TLS with this configuration.
    tls: Option<super::tls::Config>,
    handler: Arc<dyn Handler>,
    /// One per connection thread, kept until it is joined: a thread that
    /// has finished serving still exists until then, so this (not a count
    /// the thread lowers on its way out) is what bounds the threads.
    connections: Mutex<Vec<std::thread::JoinHandle<()>>>,
    stop: AtomicBool,
    /// Connections still reading their head, oldest first.
    readers: Mutex<Vec<Reader>>,
}

/// A connection reading its head, as the accept loop sees it.
struct Reader {
    id: u64,
    ip: IpAddr,
    /// Shut for reading to cut it: its blocked read returns at once.
    stream: TcpStream,
    cut: Arc<AtomicBool>,
}

impl Shared {
    /// Cuts the oldest head reader of the client address with the most of
    /// them; false when none is reading a head.
    fn cut_a_head_reader(&self) -> bool {
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        let mut counts: Vec<(IpAddr, usize)> = Vec::new();
        for r in readers.iter() {
            match counts.iter_mut().find(|(ip, _)| *ip == r.ip) {
                Some((_, n)) => *n += 1,
                None => counts.push((r.ip, 1)),
            }
        }
        // The first address to reach the highest count: max_by_key keeps
        // the last, so the counts go in reversed.
        let Some(&(ip, _)) = counts.iter().rev().max_by_key(|(_, n)| *n) else {
            return false;
        };
        let Some(at) = readers.iter().position(|r| r.ip == ip) else {
            return false;
        };
        let r = readers.remove(at);
        r.cut.store(true, Ordering::SeqCst);
        let _ = r.stream.shutdown(Shutdown::Read);
        true
    }

    fn head_read(&self, id: u64) {
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        readers.retain(|r| r.id != id);
    }

    /// Joins the connection threads that have finished and says how many
    /// are left.
    fn live_connections(&self) -> usize {
        let mut connections = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        let (done, live): (Vec<_>, Vec<_>) = connections.drain(..).partition(|t| t.is_finished());
        let left = live.len();
        *connections = live;
        // Joined outside the lock: each has finished, the join is its exit.
        drop(connections);
        for thread in done {
            let _ = thread.join();
        }
        left
    }
}

/// Stops a server started with [`Server::spawn`] (in-process servers: the
/// tests of the fleet view).
#[cfg_attr(not(test), allow(dead_code))]
pub struct Handle {
    shared: Arc<Shared>,
    addr: SocketAddr,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[cfg_attr(not(test), allow(dead_code))]
impl Handle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting (the listening socket is closed once this returns);
    /// connections being served finish.
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept call.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop_now();
        }
    }
}

/// The stack of a connection thread: it reads into a heap buffer and
/// copies a prepared answer, nothing deep.
const CONNECTION_STACK: usize = 128 * 1024;

impl Server {
    /// Speaks TLS with `tls` where given. Fails only when a token is given
    /// and no random session secret can be had for its cookie.
    pub fn new(
        listener: TcpListener,
        limits: Limits,
        token: Option<Token>,
        tls: Option<super::tls::Config>,
        handler: Arc<dyn Handler>,
    ) -> std::io::Result<Server> {
        let local = listener.local_addr()?;
        let access = match token {
            Some(token) => Some(Access::new(token, local.port())?),
            None => None,
        };
        let loopback_hosts_only = access.is_none() && local.ip().to_canonical().is_loopback();
        Ok(Server {
            listener,
            shared: Arc::new(Shared {
                limits,
                access,
                loopback_hosts_only,
                tls,
                handler,
                connections: Mutex::new(Vec::new()),
                stop: AtomicBool::new(false),
                readers: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Serves on a thread of its own until the handle is stopped or dropped.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn spawn(self) -> std::io::Result<Handle> {
        let addr = self.listener.local_addr()?;
        let shared = self.shared.clone();
        let thread = std::thread::Builder::new()
            .name("gputaskman-http".into())
            .spawn(move || self.run())?;
        Ok(Handle {
            shared,
            addr,
            thread: Some(thread),
        })
    }

    /// Accepts connections until stopped.
    pub fn run(self) {
        let rejecter = Rejecter::start();
        let limits = &self.shared.limits;
        let cut_from = limits.max_connections - limits.max_connections / 4;
        let mut next_id: u64 = 0;
        for conn in self.listener.incoming() {
            if self.shared.stop.load(Ordering::SeqCst) {
                return;
            }
            let stream = match conn {
                Ok(s) => s,
                Err(e) => {
                    // Out of descriptors or memory: give the system a moment
                    // rather than spinning on the error.
                    if !matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::ConnectionAborted) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    continue;
                }
            };
            let shared = &self.shared;
            let mut live = shared.live_connections();
            if live >= cut_from && shared.cut_a_head_reader() {
                // The cut connection's thread answers and exits at once:
                // wait that moment, so the new client takes the freed slot
                // rather than a 503 by a race.
                let freed = Instant::now() + Duration::from_millis(100);
                while live >= limits.max_connections && Instant::now() < freed {
                    std::thread::sleep(Duration::from_millis(1));
                    live = shared.live_connections();
                }
            }
            // Only this thread adds, so the count cannot pass the cap.
            if live >= limits.max_connections {
                rejecter.reject(stream);
                continue;
            }
            let (Ok(ip), Ok(handle)) = (stream.peer_addr().map(|a| a.ip()), stream.try_clone()) else {
                continue;
            };
            next_id += 1;
            let (id, cut) = (next_id, Arc::new(AtomicBool::new(false)));
            shared.readers.lock().unwrap_or_else(|e| e.into_inner()).push(Reader {
                id,
                ip,
                stream: handle,
                cut: cut.clone(),
            });
            let for_thread = shared.clone();
            let spawned = std::thread::Builder::new()
                .name("gputaskman-conn".into())
                .stack_size(CONNECTION_STACK)
                .spawn(move || serve_connection(stream, &for_thread, id, &cut));
            match spawned {
                Ok(thread) => shared
                    .connections
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(thread),
                Err(_) => shared.head_read(id),
            }
        }
    }
}

const BUSY: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n";

/// Over the connection cap: a 503 that fits any socket buffer, written at
/// once; then, on one thread for all of them, a short drain of what the
/// client sent (so that closing does not reset the connection before the
/// client reads the 503). When that thread is behind, the connection is
/// just closed.
struct Rejecter(Option<std::sync::mpsc::SyncSender<TcpStream>>);

impl Rejecter {
    fn start() -> Rejecter {
        let (tx, rx) = std::sync::mpsc::sync_channel::<TcpStream>(64);
        let spawned = std::thread::Builder::new()
            .name("gputaskman-busy".into())
            .stack_size(CONNECTION_STACK)
            .spawn(move || {
                for stream in rx {
                    let _ = stream.set_nonblocking(false);
                    drain(&mut Conn::Plain(stream), Duration::from_millis(100), 64 * 1024);
                }
            });
        Rejecter(spawned.ok().map(|_| tx))
    }

    fn reject(&self, mut stream: TcpStream) {
        let _ = stream.set_nonblocking(true);
        let _ = stream.write_all(BUSY);
        let _ = stream.shutdown(Shutdown::Write);
        if let Some(tx) = &self.0 {
            let _ = tx.try_send(stream);
        }
    }
}

enum HeadError {
    /// The client closed before sending anything: nothing to answer.
    Closed,
    Timeout,
    TooLarge,
    Io,
}

/// Reads up to the end of the request head (an empty line) within the
/// deadline and the size limit: what was read, and where the head ends in
/// it (what follows is the start of a body).
fn read_head(stream: &mut Conn, limits: &Limits, deadline: Instant) -> Result<(Vec<u8>, usize), HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HeadError::Timeout);
        }
        stream.set_read_timeout(Some(left)).map_err(|_| HeadError::Io)?;
        let room = (limits.max_head_bytes + 1 - buf.len()).min(chunk.len());
        let n = match stream.read(&mut chunk[..room]) {
            Ok(0) if buf.is_empty() => return Err(HeadError::Closed),
            Ok(0) => return Err(HeadError::Io),
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(HeadError::Timeout)
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Err(HeadError::Io),
        };
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = head_end(&buf[from..]) {
            return Ok((buf, from + end));
        }
        if buf.len() > limits.max_head_bytes {
            return Err(HeadError::TooLarge);
        }
    }
}

/// Where the head ends (after its blank line), CRLF or bare LF.
fn head_end(buf: &[u8]) -> Option<usize> {
    (0..buf.len()).find_map(|i| {
        if buf[i..].starts_with(b"\r\n\r\n") {
            Some(i + 4)
        } else if buf[i..].starts_with(b"\n\n") {
            Some(i + 2)
        } else if buf[i..].starts_with(b"\n\r\n") {
            Some(i + 3)
        } else {
            None
        }
    })
}

/// The parts of a request that matter.
#[derive(Debug, PartialEq)]
struct Request<'a> {
    method: &'a str,
    /// The path, without query or fragment.
    path: &'a str,
    authorization: Vec<&'a str>,
    cookies: Vec<&'a str>,
    host: Option<&'a str>,
    /// `Content-Length`, when given and a number.
    content_length: Option<usize>,
    has_body: bool,
}

/// Parses a request head, or says which error status it earns.
fn parse<'a>(head: &'a [u8], limits: &Limits) -> Result<Request<'a>, u16> {
    let head = std::str::from_utf8(head).map_err(|_| 400u16)?;
    let mut lines = head.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let request_line = lines.next().ok_or(400u16)?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(400);
    };
    if target.len() > limits.max_target_bytes {
        return Err(414);
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(400);
    }
    if !version.starts_with("HTTP/1.") {
        return Err(505);
    }
    if !target.starts_with('/') {
        return Err(400);
    }
    let path = target.split(['?', '#']).next().unwrap_or(target);
    let mut request = Request {
        method,
        path,
        authorization: Vec::new(),
        cookies: Vec::new(),
        host: None,
        content_length: None,
        has_body: false,
    };
    let mut count = 0;
    for line in lines {
        if line.is_empty() {
            continue; // the blank line that ends the head
        }
        count += 1;
        if count > limits.max_headers {
            return Err(431);
        }
        if line.starts_with([' ', '\t']) {
            return Err(400); // obsolete line folding
        }
        let (name, value) = line.split_once(':').ok_or(400u16)?;
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
            return Err(400);
        }
        let value = value.trim_matches([' ', '\t']);
        if name.eq_ignore_ascii_case("authorization") {
            request.authorization.push(value);
        } else if name.eq_ignore_ascii_case("cookie") {
            request.cookies.push(value);
        } else if name.eq_ignore_ascii_case("host") {
            if request.host.replace(value).is_some() {
                return Err(400); // two Host headers (RFC 9112 3.2)
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            || (name.eq_ignore_ascii_case("content-length") && value != "0")
        {
            request.has_body = true;
        }
        if name.eq_ignore_ascii_case("content-length") {
            request.content_length = value.parse().ok();
        }
    }
    Ok(request)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        303 => "See Other",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

fn error(status: u16) -> Response {
    Response::text(
        status,
        match status {
            400 => "bad request\n",
            401 => "unauthorized: send Authorization: Bearer <token>\n",
            403 => {
                "forbidden: this server has no token, so it answers only a loopback Host \
                    (localhost, 127.0.0.1, [::1]); serve other names with --token-file\n"
            }
            404 => "not found: / (the page), /metrics, /snapshot, /healthz\n",
            405 => "method not allowed: only GET (and POST /login, with a token)\n",
            408 => "request timeout\n",
            411 => "a form needs Content-Length\n",
            413 => "request body not allowed\n",
            414 => "request target too long\n",
            429 => "too many sign-in tries: wait a second\n",
            431 => "request header fields too large\n",
            505 => "HTTP/1.x only\n",
            _ => "error\n",
        },
    )
}

/// Serves connection `id`, which the accept loop registered as reading
/// its head; `cut` says it was cut for a newer one.
fn serve_connection(stream: TcpStream, shared: &Shared, id: u64, cut: &AtomicBool) {
    let limits = &shared.limits;
    let _ = stream.set_nodelay(true);
    let Some(mut stream) = Conn::accept(stream, shared.tls.as_ref()) else {
        shared.head_read(id);
        return;
    };
    let deadline = Instant::now() + limits.read_deadline;
    let head = read_head(&mut stream, limits, deadline);
    shared.head_read(id);
    // A head read whole before the cut landed is answered as usual.
    if head.is_err() && cut.load(Ordering::SeqCst) {
        let second = Duration::from_secs(1);
        let _ = write_before(&mut stream, BUSY, Instant::now() + second, second);
        stream.shutdown_write();
        return;
    }
    let (read, head_len) = match head {
        Ok(read) => read,
        Err(HeadError::Closed | HeadError::Io) => return,
        Err(HeadError::Timeout) => return respond(&mut stream, limits, &error(408), true),
        Err(HeadError::TooLarge) => return respond(&mut stream, limits, &error(431), true),
    };
    let request = match parse(&read[..head_len], limits) {
        Ok(r) => r,
        Err(status) => return respond(&mut stream, limits, &error(status), true),
    };
    let (response, linger) = answer(&mut stream, shared, &request, &read[head_len..], deadline);
    respond(&mut stream, limits, &response, linger);
}

/// The answer to a parsed request, and whether the client may still be
/// sending (a body not read).
fn answer(
    stream: &mut Conn,
    shared: &Shared,
    request: &Request,
    body_start: &[u8],
    deadline: Instant,
) -> (Response, bool) {
    let unread = request.has_body;
    match &shared.access {
        Some(access) if request.method == "POST" && request.path == "/login" => {
            return match read_form(stream, request, body_start, deadline) {
                Ok(form) => (signed_in(access, &form, shared.tls.is_some()), false),
                Err(status) => (error(status), true),
            };
        }
        Some(access) if !access.admits(&request.authorization, &request.cookies) => {
            if request.method == "GET" && request.path == "/" {
                return (sign_in_page(false), unread);
            }
            let refused = error(401).with_header("WWW-Authenticate", "Bearer realm=\"gputaskman\"".into());
            return (refused, unread);
        }
        None if shared.loopback_hosts_only && !access::loopback_host(request.host) => return (error(403), unread),
        _ => {}
    }
    if request.method != "GET" {
        return (error(405).with_header("Allow", "GET".into()), unread);
    }
    if request.has_body {
        return (error(413), true);
    }
    (shared.handler.get(request.path).unwrap_or_else(|| error(404)), false)
}

/// To the page with the session cookie when the form holds the token;
/// the form again when not, or 429 past the tries a second. Over TLS the
/// cookie is `Secure`: a browser never sends it over plain HTTP.
fn signed_in(access: &Access, form: &[u8], tls: bool) -> Response {
    match access.login(form) {
        Ok(cookie) => Response::new(303, "text/plain; charset=utf-8", Body::Static("signed in\n"))
            .with_header("Location", "./".into())
            .with_header("Set-Cookie", if tls { format!("{cookie}; Secure") } else { cookie }),
        Err(access::Refused::WrongToken) => sign_in_page(true),
        Err(access::Refused::TooManyTries) => error(429).with_header("Retry-After", "1".into()),
    }
}

/// The sign-in form (401).
fn sign_in_page(failed: bool) -> Response {
    Response::new(
        401,
        "text/html; charset=utf-8",
        Body::Owned(access::sign_in_page(failed)),
    )
    .with_header("WWW-Authenticate", "Bearer realm=\"gputaskman\"".into())
}

/// The sign-in form's body: `Content-Length` bytes, at most
/// [`access::FORM_LIMIT`], the first of them already read with the head,
/// the rest before the request's deadline.
fn read_form(stream: &mut Conn, request: &Request, started: &[u8], deadline: Instant) -> Result<Vec<u8>, u16> {
    let len = request.content_length.ok_or(411u16)?;
    if len > access::FORM_LIMIT {
        return Err(413);
    }
    let mut form = started[..started.len().min(len)].to_vec();
    let mut chunk = [0u8; 512];
    while form.len() < len {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(408);
        }
        stream.set_read_timeout(Some(left)).map_err(|_| 400u16)?;
        let want = (len - form.len()).min(chunk.len());
        match stream.read(&mut chunk[..want]) {
            Ok(0) => return Err(400),
            Ok(n) => form.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return Err(408),
            Err(_) => return Err(400),
        }
    }
    Ok(form)
}

/// Writes the response within the write deadline and closes. After an
/// error the client may still be sending: its input is drained for a
/// moment first, so that closing does not reset the connection before the
/// client reads the answer.
fn respond(stream: &mut Conn, limits: &Limits, response: &Response, linger: bool) {
    let body = response.body.bytes();
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\
         X-Content-Type-Options: nosniff\r\nConnection: close\r\n{SECURITY_HEADERS}",
        response.status,
        reason(response.status),
        response.content_type,
        body.len(),
    );
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let deadline = Instant::now() + limits.write_deadline;
    let stall = limits.write_stall;
    if write_before(stream, head.as_bytes(), deadline, stall).is_ok() {
        let _ = write_before(stream, body, deadline, stall);
    }
    stream.shutdown_write();
    if linger {
        drain(stream, Duration::from_secs(1), 1 << 20);
    }
}

/// Writes `data` before `deadline`, each write making progress within
/// `stall`.
fn write_before(stream: &mut Conn, mut data: &[u8], deadline: Instant, stall: Duration) -> std::io::Result<()> {
    while !data.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ErrorKind::TimedOut.into());
        }
        stream.set_write_timeout(Some(left.min(stall)))?;
        match stream.write(&data[..data.len().min(256 * 1024)]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads and discards what the client still sends, for at most `time` and
/// `bytes`.
fn drain(stream: &mut Conn, time: Duration, bytes: usize) {
    let deadline = Instant::now() + time;
    let mut sink = [0u8; 4096];
    let mut total = 0;
    while total < bytes {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(n) => total += n,
        }
    }
}

mod conn;
#[cfg(test)]
pub(crate) mod tests;
