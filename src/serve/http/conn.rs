//! A client's connection: plain TCP, or TLS over it (rustls, which
//! completes the handshake within the first reads, so the head's deadline
//! bounds it too). Timeouts are the socket's either way.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

pub(super) enum Conn {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
}

impl Conn {
    /// `stream` as the server speaks on it: TLS where it has a config.
    /// None when no TLS session can be made for it.
    pub(super) fn accept(stream: TcpStream, tls: Option<&crate::serve::tls::Config>) -> Option<Conn> {
        let Some(config) = tls else {
            return Some(Conn::Plain(stream));
        };
        #[cfg(feature = "tls")]
        {
            let session = rustls::ServerConnection::new(config.clone()).ok()?;
            Some(Conn::Tls(Box::new(rustls::StreamOwned::new(session, stream))))
        }
        #[cfg(not(feature = "tls"))]
        match *config {}
    }

    pub(super) fn socket(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            #[cfg(feature = "tls")]
            Conn::Tls(t) => &t.sock,
        }
    }

    pub(super) fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        self.socket().set_read_timeout(t)
    }

    pub(super) fn set_write_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        self.socket().set_write_timeout(t)
    }

    /// Ends what the server sends: TLS's close_notify first, then the
    /// socket's write side.
    pub(super) fn shutdown_write(&mut self) {
        #[cfg(feature = "tls")]
        if let Conn::Tls(t) = self {
            let _ = t.flush();
            t.conn.send_close_notify();
            let _ = t.conn.complete_io(&mut t.sock);
        }
        let _ = self.socket().shutdown(Shutdown::Write);
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            #[cfg(feature = "tls")]
            Conn::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            #[cfg(feature = "tls")]
            Conn::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            #[cfg(feature = "tls")]
            Conn::Tls(t) => t.flush(),
        }
    }
}
