//! Durable API tokens: minting one (the secret shown once, its hash
//! stored), and the [`TokenLookup`] over the store's token table that the
//! middleware asks.

use std::sync::Arc;

use async_trait::async_trait;
use drover::Queue;
use drover::access::{NewToken, TokenRow};
use uuid::Uuid;

use crate::auth::{ApiPrincipal, Auth, Role, TokenHash, TokenLookup, TokenSecret};

/// What a new token may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenGrant {
    /// Its role.
    pub role: Role,
    /// The one tenant it sees; `None` sees every tenant.
    pub tenant: Option<Uuid>,
    /// The kinds it may enqueue.
    pub enqueue: Vec<String>,
    /// A label for people.
    pub label: String,
    /// A worker token's work grants, `<lane>:<kind>`; empty for every
    /// other role.
    pub work: Vec<String>,
}

/// Mints a token, stores its hash, and returns the secret (to show once)
/// with the stored row.
///
/// # Errors
/// [`drover::Error::InvalidInput`] on `enqueue` for a grant that is not a
/// kind name, `prefix.*` or `*`; on `work` for a grant not of the form
/// `<lane>:<kind>`, work grants on a role other than `worker`, or a worker
/// token without any; on `tenant` or `enqueue` for a worker token (it
/// claims across tenants, as a native worker does, and enqueues nothing);
/// storage errors.
pub async fn create(queue: &Queue, grant: &TokenGrant) -> drover::Result<(TokenSecret, TokenRow)> {
    for g in &grant.enqueue {
        let name = g.strip_suffix(".*").unwrap_or(g);
        if g != "*" {
            drover::item::validate_kind(name).map_err(|_| {
                drover::Error::invalid("enqueue", format!("{g:?} is not a kind, prefix.* or *"))
            })?;
        }
    }
    for g in &grant.work {
        crate::auth::validate_work_grant(g)?;
    }
    match grant.role {
        Role::Worker if grant.work.is_empty() => {
            return Err(drover::Error::invalid(
                "work",
                "a worker token needs at least one <lane>:<kind> grant",
            ));
        }
        Role::Worker if grant.tenant.is_some() => {
            return Err(drover::Error::invalid(
                "tenant",
                "a worker token claims across tenants, as a native worker does; it cannot be scoped",
            ));
        }
        Role::Worker if !grant.enqueue.is_empty() => {
            return Err(drover::Error::invalid(
                "enqueue",
                "a worker token reaches only the worker routes; it enqueues nothing",
            ));
        }
        Role::Worker => {}
        _ if !grant.work.is_empty() => {
            return Err(drover::Error::invalid(
                "work",
                "only a worker token holds work grants",
            ));
        }
        _ => {}
    }
    if grant.label.len() > 256 {
        return Err(drover::Error::invalid("label", "must be at most 256 bytes"));
    }
    let secret = TokenSecret::generate();
    let row = queue
        .token_insert(&NewToken {
            id: Uuid::now_v7(),
            hash: secret.hash().to_hex(),
            role: grant.role.as_str().to_owned(),
            scope_tenant: grant.tenant,
            enqueue: grant.enqueue.clone(),
            label: grant.label.clone(),
            work: grant.work.clone(),
        })
        .await?;
    tracing::info!(token = %row.id, role = %row.role, "API token created");
    Ok((secret, row))
}

/// The principal a stored token stands for.
///
/// # Errors
/// [`drover::Error::Config`] for a role the table should never hold.
pub fn principal_of(row: &TokenRow) -> drover::Result<ApiPrincipal> {
    let role = row
        .role
        .parse::<Role>()
        .map_err(|e| drover::Error::Config(format!("api_tokens.role: {e}")))?;
    Ok(ApiPrincipal {
        token_id: row.id,
        role,
        tenant: row.scope_tenant,
        enqueue: row.enqueue.clone(),
        work: row.work.clone(),
    })
}

/// The token table of a queue's store, as the middleware asks it.
#[derive(Clone)]
pub struct StoreTokens {
    queue: Queue,
}

impl StoreTokens {
    /// Looks tokens up in `queue`'s store.
    pub fn new(queue: Queue) -> Self {
        StoreTokens { queue }
    }
}

#[async_trait]
impl TokenLookup for StoreTokens {
    async fn lookup(&self, hash: &TokenHash) -> drover::Result<Option<ApiPrincipal>> {
        let hex = hash.to_hex();
        let Some(row) = self.queue.token_by_hash(&hex).await? else {
            return Ok(None);
        };
        // The store found it by equality; compare again in constant time
        // so the acceptance itself never short-circuits on a prefix.
        let mut stored = [0u8; 32];
        if hex::decode_to_slice(&row.hash, &mut stored).is_err() || !TokenHash(stored).ct_eq(hash) {
            return Ok(None);
        }
        principal_of(&row).map(Some)
    }
}

/// The authentication `drover serve` uses: the store's token table when it
/// holds a live token, else none (the caller then decides: a one-time
/// token on loopback, or refusing to start).
///
/// # Errors
/// Storage errors.
pub async fn auth_from_store(queue: &Queue) -> drover::Result<Auth> {
    let live = queue
        .token_list()
        .await?
        .iter()
        .any(|t| t.revoked_at.is_none());
    let auth = Auth::deny_all();
    Ok(if live {
        auth.with_lookup(Arc::new(StoreTokens::new(queue.clone())))
    } else {
        auth
    })
}
