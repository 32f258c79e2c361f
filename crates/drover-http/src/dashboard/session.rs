//! Dashboard sessions and the CSRF check.
//!
//! A session is created by logging in with an API token: the token is
//! checked once and never stored in the cookie; the cookie carries a random
//! session id (256 bits) that maps, in this process's memory, to the
//! principal and the session's CSRF token. The cookie is `HttpOnly` and
//! `SameSite=Strict`, and `Secure` when the dashboard is served over TLS.
//!
//! Every state-changing request is a POST and passes two checks: the
//! browser's Fetch-Metadata / `Origin` say it is not cross-site, and it
//! carries the session's CSRF token (a form field or the `X-CSRF-Token`
//! header htmx sends), compared in constant time. Sessions end on logout,
//! after their lifetime, or as soon as their token is revoked: the session
//! keeps the token's hash (never the token) and every request asks the
//! token table again (see `pages::viewer`), so a `drover token revoke`
//! ends the sessions in every `serve` process sharing the database. A
//! restart of the server ends them all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use subtle::ConstantTimeEq;

use crate::auth::{ApiPrincipal, TokenHash};

/// The session cookie's name.
pub const COOKIE: &str = "drover_session";
/// The header htmx sends the CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long a session lasts from login when none is configured.
pub const SESSION_TTL_DEFAULT: Duration = Duration::from_secs(8 * 3600);

fn random_hex() -> String {
    let b: [u8; 32] = rand::random();
    hex::encode(b)
}

/// One logged-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    /// Who logged in.
    pub principal: ApiPrincipal,
    /// The token every state-changing request of this session carries.
    pub csrf: String,
    /// The hash of the API token the session was started with, asked
    /// again on every request so a revoke ends the session.
    pub token: TokenHash,
    expires: Instant,
}

/// The sessions of this process.
#[derive(Debug, Clone)]
pub struct Sessions {
    map: Arc<Mutex<HashMap<String, Session>>>,
    ttl: Duration,
}

impl Sessions {
    /// No sessions; each lasts `ttl` from login.
    pub fn new(ttl: Duration) -> Self {
        Sessions {
            map: Arc::new(Mutex::new(HashMap::new())),
            ttl,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // A panic while holding the map leaves it consistent (every write
        // is one insert or remove), so a poisoned lock is still usable.
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts a session for `principal`, logged in with the token whose
    /// hash is `token`; returns its id (the cookie's value).
    pub fn create(&self, principal: ApiPrincipal, token: TokenHash) -> String {
        let id = random_hex();
        let now = Instant::now();
        let mut map = self.lock();
        map.retain(|_, s| s.expires > now);
        map.insert(
            id.clone(),
            Session {
                principal,
                csrf: random_hex(),
                token,
                expires: now + self.ttl,
            },
        );
        id
    }

    /// The live session with this id.
    pub fn get(&self, id: &str) -> Option<Session> {
        let map = self.lock();
        map.get(id).filter(|s| s.expires > Instant::now()).cloned()
    }

    /// Puts the token's current grants on a live session (a token whose
    /// role changed keeps its session with the new role).
    pub fn refresh(&self, id: &str, principal: &ApiPrincipal) {
        if let Some(s) = self.lock().get_mut(id) {
            s.principal = principal.clone();
        }
    }

    /// Ends a session.
    pub fn remove(&self, id: &str) {
        self.lock().remove(id);
    }
}

/// The session id a request's cookie names, if any.
pub fn cookie_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_owned())
        .filter(|v| !v.is_empty() && v.len() <= 128)
}

/// The `Set-Cookie` value starting a session.
pub fn set_cookie(id: &str, path: &str, secure: bool, ttl: Duration) -> String {
    format!(
        "{COOKIE}={id}; Path={path}; HttpOnly; SameSite=Strict; Max-Age={}{}",
        ttl.as_secs(),
        if secure { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value ending a session.
pub fn clear_cookie(path: &str, secure: bool) -> String {
    format!(
        "{COOKIE}=; Path={path}; HttpOnly; SameSite=Strict; Max-Age=0{}",
        if secure { "; Secure" } else { "" }
    )
}

/// Why a state-changing request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsrfRefusal {
    /// The browser says the request comes from another site.
    CrossSite,
    /// The `Origin` header names another origin.
    ForeignOrigin,
    /// No CSRF token, or not the session's.
    BadToken,
}

impl CsrfRefusal {
    /// What the refusal says.
    pub fn reason(self) -> &'static str {
        match self {
            CsrfRefusal::CrossSite => "a cross-site request may not change anything",
            CsrfRefusal::ForeignOrigin => "the request's Origin is not this dashboard",
            CsrfRefusal::BadToken => "the CSRF token is missing or wrong",
        }
    }
}

/// The origin checks every POST passes, login included: Fetch-Metadata
/// first (a browser that sends it is believed), else `Origin` against
/// `Host`. A request with neither (not from a browser) passes here and is
/// left to the token.
pub fn check_origin(headers: &HeaderMap) -> Result<(), CsrfRefusal> {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return match site {
            "same-origin" | "none" => Ok(()),
            _ => Err(CsrfRefusal::CrossSite),
        };
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let authority = origin
            .split_once("://")
            .map_or("", |(_, rest)| rest.trim_end_matches('/'));
        if origin == "null" || authority != host {
            return Err(CsrfRefusal::ForeignOrigin);
        }
    }
    Ok(())
}

/// The full check of a session's state-changing request: the origin
/// checks, then the token from the header or the form, in constant time.
pub fn check(
    headers: &HeaderMap,
    session: &Session,
    form_token: Option<&str>,
) -> Result<(), CsrfRefusal> {
    check_origin(headers)?;
    let sent = headers
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .or(form_token)
        .unwrap_or("");
    if sent.len() == session.csrf.len()
        && bool::from(sent.as_bytes().ct_eq(session.csrf.as_bytes()))
    {
        Ok(())
    } else {
        Err(CsrfRefusal::BadToken)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;
    use crate::auth::Role;
    use axum::http::HeaderValue;

    fn principal() -> ApiPrincipal {
        ApiPrincipal {
            token_id: uuid::Uuid::nil(),
            role: Role::Operator,
            tenant: None,
            enqueue: vec![],
            work: vec![],
        }
    }

    #[test]
    fn cross_site_and_foreign_origin_are_refused_before_the_token() {
        let s = Sessions::new(SESSION_TTL_DEFAULT);
        let id = s.create(principal(), crate::auth::TokenSecret::generate().hash());
        let session = s.get(&id).unwrap();
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        assert_eq!(check(&h, &session, None), Err(CsrfRefusal::BadToken));
        assert_eq!(
            check(&h, &session, Some("nope")),
            Err(CsrfRefusal::BadToken)
        );
        assert_eq!(check(&h, &session, Some(&session.csrf)), Ok(()));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert_eq!(
            check(&h, &session, Some(&session.csrf)),
            Err(CsrfRefusal::ForeignOrigin)
        );
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8080"),
        );
        assert_eq!(check(&h, &session, Some(&session.csrf)), Ok(()));
        h.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert_eq!(
            check(&h, &session, Some(&session.csrf)),
            Err(CsrfRefusal::CrossSite)
        );
    }

    #[test]
    fn cookies_are_http_only_strict_and_secure_under_tls() {
        let c = set_cookie("abc", "/ui", true, SESSION_TTL_DEFAULT);
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict") && c.ends_with("; Secure"));
        assert!(!set_cookie("abc", "/ui", false, SESSION_TTL_DEFAULT).contains("Secure"));
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; drover_session=xyz; b=2"),
        );
        assert_eq!(cookie_id(&h).as_deref(), Some("xyz"));
    }

    #[test]
    fn a_removed_session_is_gone() {
        let s = Sessions::new(SESSION_TTL_DEFAULT);
        let id = s.create(principal(), crate::auth::TokenSecret::generate().hash());
        assert!(s.get(&id).is_some());
        s.remove(&id);
        assert!(s.get(&id).is_none());
    }
}
