//! Authentication and authorisation, default-deny.
//!
//! Owns the API's credentials (bearer tokens), the principal a token
//! stands for (a [`Role`], an optional tenant, the kinds it may enqueue)
//! and the middleware every route goes through.
//!
//! Invariants:
//! - **Default-deny.** Every path but exactly `/healthz`, `/readyz` and
//!   `/v1/openapi.json` (relative to where the router is mounted) answers
//!   401 without a valid credential, unknown paths included: an
//!   unauthenticated caller learns no more than the published document
//!   says (it describes the API; it holds no data).
//! - **Every refusal for a credential is logged** (method, path, why), never
//!   with the token or its hash.
//! - **A token is never kept, compared or logged in the clear.** Only its
//!   SHA-256 is held ([`TokenHash`]); a presented token is hashed and the
//!   hashes compared in constant time. [`TokenSecret`]'s `Debug` is
//!   redacted, so a stray `?secret` in a log line shows nothing.
//! - **Read-only mode refuses every state-changing request** (any method
//!   but GET, HEAD and OPTIONS) with 403 before a handler runs.
//! - **A worker token reaches only the worker routes** (`/v1/work/...`):
//!   anywhere else it answers 403 before a handler runs, so it reads no
//!   item, lane or stat it was not handed by a claim. Conversely only a
//!   worker token claims: the worker routes refuse every other role
//!   ([`ApiPrincipal::require_work`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use drover::queue::{OPERATE_PERMISSION, Principal};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::problem::Problem;

/// The prefix of every token drover mints, so a leaked one is recognisable
/// to secret scanners.
pub const TOKEN_PREFIX: &str = "drv_";

/// The paths that answer without credentials (exact match): the probes,
/// and the OpenAPI document, so a client generator can fetch it by URL.
pub const OPEN_PATHS: [&str; 3] = ["/healthz", "/readyz", "/v1/openapi.json"];

/// Where the worker routes live: the only paths a worker token reaches.
pub const WORK_PATH_PREFIX: &str = "/v1/work/";

/// What a principal may do. Ordered: each role holds the ones below it,
/// except [`Role::Worker`], which is below them all and holds only its
/// work grants.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Claims and settles items of its grants' lanes and kinds over the
    /// worker routes, and nothing else (it reads no list, no item).
    Worker,
    /// Reads items, lanes, workers, stats.
    Viewer,
    /// Also retries, cancels and pauses.
    Operator,
    /// What an operator may do. Tokens themselves are managed with
    /// `drover token` against the database; no HTTP route manages them.
    Admin,
}

impl Role {
    /// The role's name as the CLI and the API spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Worker => "worker",
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "worker" => Ok(Role::Worker),
            "viewer" => Ok(Role::Viewer),
            "operator" => Ok(Role::Operator),
            "admin" => Ok(Role::Admin),
            other => Err(format!(
                "{other:?} is not a role (viewer, operator, admin or worker)"
            )),
        }
    }
}

/// Who a request comes from: the token's identity and grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiPrincipal {
    /// The token's id: the actor stamped on what the request writes.
    pub token_id: Uuid,
    /// What it may do.
    pub role: Role,
    /// The one tenant it sees; `None` sees every tenant.
    pub tenant: Option<Uuid>,
    /// The kinds it may enqueue: names or `prefix.*` wildcards, `*` for
    /// every kind; empty, it may enqueue nothing.
    pub enqueue: Vec<String>,
    /// What a worker token may claim: `<lane>:<kind>` grants (lane a name
    /// or `*`, kind a name, `prefix.*` or `*`); empty for other roles.
    #[serde(default)]
    pub work: Vec<String>,
}

/// Checks a work grant's form: `<lane>:<kind>`, the lane a lane name or
/// `*`, the kind a kind name, `prefix.*` or `*`.
///
/// # Errors
/// [`drover::Error::InvalidInput`] on `work` naming the grant.
pub fn validate_work_grant(grant: &str) -> drover::Result<()> {
    let bad = || {
        drover::Error::invalid(
            "work",
            format!("{grant:?} is not <lane>:<kind> (lane or *, kind, prefix.* or *)"),
        )
    };
    let (lane, kind) = grant.split_once(':').ok_or_else(bad)?;
    if lane != "*" {
        drover::item::validate_lane(lane).map_err(|_| bad())?;
    }
    if kind != "*" {
        drover::item::validate_kind(kind.strip_suffix(".*").unwrap_or(kind)).map_err(|_| bad())?;
    }
    Ok(())
}

impl ApiPrincipal {
    /// True when the principal holds at least `role`.
    pub fn has(&self, role: Role) -> bool {
        self.role >= role
    }

    /// Refuses with 403 unless the principal holds at least `role`.
    ///
    /// # Errors
    /// [`Problem::forbidden`] naming the role needed.
    pub fn require(&self, role: Role) -> Result<(), Problem> {
        if self.has(role) {
            Ok(())
        } else {
            Err(Problem::forbidden(format!(
                "this needs the {} role; the token holds {}",
                role.as_str(),
                self.role.as_str()
            )))
        }
    }

    /// True when the token's work grants cover claiming `kind` on `lane`.
    pub fn may_work(&self, lane: &str, kind: &str) -> bool {
        self.role == Role::Worker
            && self.work.iter().any(|g| {
                g.split_once(':').is_some_and(|(l, k)| {
                    (l == "*" || l == lane) && drover::queue::permission_covers(k, kind)
                })
            })
    }

    /// True when some work grant covers every kind on `lane` (`lane:*` or
    /// `*:*`): a claim there may leave its kinds unnamed.
    pub fn may_work_any_kind(&self, lane: &str) -> bool {
        self.role == Role::Worker
            && self.work.iter().any(|g| {
                g.split_once(':')
                    .is_some_and(|(l, k)| (l == "*" || l == lane) && k == "*")
            })
    }

    /// Refuses with 403 unless the principal is a worker token.
    ///
    /// # Errors
    /// [`Problem::forbidden`] naming the role needed.
    pub fn require_work(&self) -> Result<(), Problem> {
        if self.role == Role::Worker {
            Ok(())
        } else {
            Err(Problem::forbidden(format!(
                "claiming needs a worker token; the token holds {} (mint one with `drover token create --role worker --work <lane>:<kind>`)",
                self.role.as_str()
            )))
        }
    }

    /// True when the token's enqueue grants cover `kind`.
    pub fn may_enqueue(&self, kind: &str) -> bool {
        self.enqueue
            .iter()
            .any(|g| drover::queue::permission_covers(g, kind))
    }

    /// The tenant a request of this principal reads or writes: its own
    /// when it has one (whatever was asked), else the one asked for, else
    /// the nil tenant of single-tenant use.
    ///
    /// # Errors
    /// 403 when a tenant-scoped principal asks for another tenant.
    pub fn tenant_for(&self, asked: Option<Uuid>) -> Result<Uuid, Problem> {
        match (self.tenant, asked) {
            (Some(own), Some(a)) if own != a => {
                Err(Problem::forbidden("the token is scoped to another tenant").field("tenant"))
            }
            (Some(own), _) => Ok(own),
            (None, a) => Ok(a.unwrap_or_else(Uuid::nil)),
        }
    }

    /// The queue principal this API principal acts as in `tenant`, holding
    /// `permission` (the kind's, once the token's grants cover the kind)
    /// and, for operators, the permission to retry and cancel.
    pub fn queue_principal(&self, tenant: Uuid, permission: Option<&str>) -> Principal {
        let mut perms: BTreeSet<String> = BTreeSet::new();
        if let Some(p) = permission {
            perms.insert(p.to_owned());
        }
        if self.has(Role::Operator) {
            perms.insert(OPERATE_PERMISSION.to_owned());
        }
        Principal::new(self.token_id, tenant, perms)
    }
}

/// A token as the caller holds it. Its `Debug` and `Display` are redacted;
/// [`TokenSecret::expose`] is the one way to the text.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSecret(String);

impl TokenSecret {
    /// Mints a token: [`TOKEN_PREFIX`] and 256 random bits in hex.
    pub fn generate() -> Self {
        let bytes: [u8; 32] = rand::random();
        TokenSecret(format!("{TOKEN_PREFIX}{}", hex::encode(bytes)))
    }

    /// Wraps a token text presented by a caller.
    pub fn from_presented(text: impl Into<String>) -> Self {
        TokenSecret(text.into())
    }

    /// The token's text, to show its owner once.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The hash the server keeps.
    pub fn hash(&self) -> TokenHash {
        TokenHash(Sha256::digest(self.0.as_bytes()).into())
    }
}

impl std::fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSecret(<redacted>)")
    }
}

/// The SHA-256 of a token: what is stored and compared.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TokenHash(pub [u8; 32]);

impl TokenHash {
    /// Constant-time equality: how long it takes says nothing of where two
    /// hashes first differ.
    pub fn ct_eq(&self, other: &TokenHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }

    /// The hash in hex, as the token table stores it.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl std::fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenHash(<redacted>)")
    }
}

/// Looks a token hash up in a durable token table.
#[async_trait::async_trait]
pub trait TokenLookup: Send + Sync + 'static {
    /// The live (not revoked) token with this hash, if any.
    ///
    /// # Errors
    /// Storage errors; the middleware answers 503 for them.
    async fn lookup(&self, hash: &TokenHash) -> drover::Result<Option<ApiPrincipal>>;
}

/// How the API authenticates: fixed tokens held in memory (a generated
/// one-time token, a host's own), a durable token table, or both; and
/// whether it is read-only.
#[derive(Clone, Default)]
pub struct Auth {
    fixed: Arc<Vec<(TokenHash, ApiPrincipal)>>,
    lookup: Option<Arc<dyn TokenLookup>>,
    read_only: bool,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("fixed_tokens", &self.fixed.len())
            .field("token_table", &self.lookup.is_some())
            .field("read_only", &self.read_only)
            .finish()
    }
}

impl Auth {
    /// No credential is accepted: every route but the open ones answers
    /// 401. Add tokens to open it.
    pub fn deny_all() -> Self {
        Auth::default()
    }

    /// Accepts `secret` as `principal` (held hashed).
    pub fn with_token(mut self, secret: &TokenSecret, principal: ApiPrincipal) -> Self {
        Arc::make_mut(&mut self.fixed).push((secret.hash(), principal));
        self
    }

    /// Accepts the tokens of a durable table as well.
    pub fn with_lookup(mut self, lookup: Arc<dyn TokenLookup>) -> Self {
        self.lookup = Some(lookup);
        self
    }

    /// Refuses every state-changing request when `on`.
    pub fn read_only(mut self, on: bool) -> Self {
        self.read_only = on;
        self
    }

    /// True in read-only mode.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// True when some credential can be accepted.
    pub fn is_configured(&self) -> bool {
        !self.fixed.is_empty() || self.lookup.is_some()
    }

    /// The principal a presented token stands for.
    ///
    /// # Errors
    /// The token table's storage error.
    pub async fn authenticate(&self, secret: &TokenSecret) -> drover::Result<Option<ApiPrincipal>> {
        self.authenticate_hash(&secret.hash()).await
    }

    /// The principal the token with this hash stands for now: `None` once
    /// it is revoked (or was never known). The dashboard asks this on every
    /// request of a session, so a revoke ends the token's sessions at once
    /// in every `serve` process that shares the token table.
    ///
    /// # Errors
    /// The token table's storage error.
    pub async fn authenticate_hash(
        &self,
        hash: &TokenHash,
    ) -> drover::Result<Option<ApiPrincipal>> {
        let hash = *hash;
        // Every fixed hash is compared, match or not, so the time taken
        // does not say which one matched.
        let mut found = None;
        for (h, p) in self.fixed.iter() {
            if h.ct_eq(&hash) && found.is_none() {
                found = Some(p.clone());
            }
        }
        if found.is_some() {
            return Ok(found);
        }
        match &self.lookup {
            Some(l) => l.lookup(&hash).await,
            None => Ok(None),
        }
    }
}

/// The bearer token of a request, if it sent one.
fn bearer(req: &Request) -> Option<TokenSecret> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then(|| TokenSecret::from_presented(token))
}

fn challenge(problem: Problem) -> Response {
    let mut res = problem.into_response();
    res.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"drover\""),
    );
    res
}

/// Logs a request refused for its credential (a 401): the method, the path
/// and why, never the token nor its hash. At `warn`, so `drover serve`'s
/// default filter shows it.
fn refused(req: &Request, why: &'static str) {
    tracing::warn!(method = %req.method(), path = req.uri().path(), why, "API request refused: 401");
}

/// The middleware in front of every route: lets the open paths through,
/// authenticates everything else, puts the [`ApiPrincipal`] in the
/// request's extensions, and enforces read-only mode.
pub async fn require_auth(State(auth): State<Auth>, mut req: Request, next: Next) -> Response {
    if OPEN_PATHS.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    // Another layer (the dashboard's session cookie) may have
    // authenticated the request already.
    if req.extensions().get::<ApiPrincipal>().is_none() {
        let Some(secret) = bearer(&req) else {
            refused(&req, "no bearer token");
            return challenge(Problem::unauthorized());
        };
        match auth.authenticate(&secret).await {
            Ok(Some(p)) => {
                req.extensions_mut().insert(p);
            }
            Ok(None) => {
                refused(&req, "the token is unknown or revoked");
                return challenge(
                    Problem::unauthorized().detail("the token is unknown or revoked"),
                );
            }
            Err(e) => return Problem::from(e).into_response(),
        }
    }
    let worker = req
        .extensions()
        .get::<ApiPrincipal>()
        .is_some_and(|p| p.role == Role::Worker);
    if worker && !req.uri().path().starts_with(WORK_PATH_PREFIX) {
        return Problem::forbidden("a worker token reaches only the worker routes (/v1/work/...)")
            .into_response();
    }
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if auth.read_only && !safe {
        return Problem::forbidden("the API is in read-only mode").into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_secret_never_shows_in_debug() {
        let s = TokenSecret::generate();
        assert!(s.expose().starts_with(TOKEN_PREFIX));
        assert_eq!(s.expose().len(), TOKEN_PREFIX.len() + 64);
        assert!(!format!("{s:?}").contains(s.expose()));
        assert!(!format!("{:?}", s.hash()).contains(&s.hash().to_hex()));
    }

    #[test]
    fn roles_are_ordered_and_tenants_scoped() {
        let t = Uuid::now_v7();
        let p = ApiPrincipal {
            token_id: Uuid::now_v7(),
            role: Role::Operator,
            tenant: Some(t),
            enqueue: vec!["mail.*".into()],
            work: vec![],
        };
        assert!(p.has(Role::Viewer) && p.has(Role::Operator) && !p.has(Role::Admin));
        assert!(p.may_enqueue("mail.send") && !p.may_enqueue("billing.refund"));
        assert_eq!(p.tenant_for(None).unwrap(), t);
        assert_eq!(p.tenant_for(Some(Uuid::now_v7())).unwrap_err().status, 403);
        assert!(
            !p.may_work("mail", "mail.send"),
            "only a worker token claims"
        );
    }

    #[test]
    fn work_grants_cover_lanes_and_kinds() {
        let w = ApiPrincipal {
            token_id: Uuid::now_v7(),
            role: Role::Worker,
            tenant: None,
            enqueue: vec![],
            work: vec!["mail:mail.*".into(), "*:report".into()],
        };
        assert!(!w.has(Role::Viewer), "a worker token reads nothing");
        assert!(w.may_work("mail", "mail.send") && w.may_work("other", "report"));
        assert!(!w.may_work("other", "mail.send") && !w.may_work("mail", "billing"));
        assert!(!w.may_work_any_kind("mail"));
        let all = ApiPrincipal {
            work: vec!["mail:*".into()],
            ..w.clone()
        };
        assert!(all.may_work_any_kind("mail") && !all.may_work_any_kind("other"));
        for good in ["mail:mail.*", "*:*", "default:report"] {
            assert!(validate_work_grant(good).is_ok(), "{good}");
        }
        for bad in ["mail", "Mail:x", "mail:", ":x", "a b:c"] {
            assert!(validate_work_grant(bad).is_err(), "{bad}");
        }
    }
}
