-- drover 0037: worker tokens, for workers over HTTP.
--
-- A token of role `worker` claims and settles items through the HTTP
-- API and nothing else; `work` holds its grants, each `<lane>:<kind>`
-- where the lane is a name or `*` and the kind a name, `prefix.*` or `*`.
-- Only a worker token holds grants (the CHECK), so an operator or admin
-- token never claims. Expand only: an older binary reading a worker row
-- refuses the token (an unknown role), it never widens it.
ALTER TABLE api_tokens DROP CONSTRAINT IF EXISTS api_tokens_role_check;
ALTER TABLE api_tokens
    ADD CONSTRAINT api_tokens_role_check
    CHECK (role IN ('viewer', 'operator', 'admin', 'worker'));
ALTER TABLE api_tokens
    ADD COLUMN work text[] NOT NULL DEFAULT '{}';
ALTER TABLE api_tokens
    ADD CONSTRAINT api_tokens_work_only_workers
    CHECK (role = 'worker' OR cardinality(work) = 0);
