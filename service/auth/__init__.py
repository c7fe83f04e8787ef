"""Identity and access: passwords, access keys, tokens, signed URLs, throttling, policy.

Pure logic and small blocking helpers; the HTTP layer decides when to call them. The public
API is re-exported here; the modules behind it each hold one job:

- ``passwords``: Argon2id hashing (off the event loop) and the password policy.
- ``keys``: access key generation, secret digests, Basic and Bearer header parsing.
- ``tokens``: stateless bearer tokens for logged-in users.
- ``presign``: presigned URL signatures and their checking.
- ``share_tokens``: signed video share tokens.
- ``throttle``: slowing down failed logins per username and address.
- ``server_secret``: the HMAC secret kept in the data dir.
- ``bootstrap``: the first start's admin password and root key, and credentials.json.
- ``policy``: principals, actions and the one authorisation decision.
- ``errors``: the error tree, bound to the contract's codes.

See docs/security.md for the threat model these serve.

May import (docs/architecture.md, "Layers"): ``fsseam``, ``service.common``.
"""

from service.auth.auth_errors import (
    WWW_AUTHENTICATE,
    AccessDeniedError,
    AccountDisabledError,
    AuthError,
    BootstrapError,
    ServerSecretError,
    SignatureExpiredError,
    SignatureInvalidError,
    UnauthorizedError,
)
from service.auth.bootstrap import (
    ADMIN_USERNAME,
    CREDENTIALS_FILENAME,
    BootstrapCredentials,
    resolve_bootstrap,
    write_credentials_file,
)
from service.auth.keys import (
    ACCESS_KEY_ID_PREFIX,
    SECRET_KEY_PREFIX,
    digest_secret,
    generate_access_key,
    is_access_key_id,
    is_secret_key,
    parse_basic_authorization,
    parse_bearer_authorization,
    secret_matches,
)
from service.auth.passwords import (
    DEFAULT_HASHER,
    hash_password,
    needs_rehash,
    validate_password,
    verify_password,
)
from service.auth.policy import (
    Action,
    Principal,
    Resource,
    Role,
    Scope,
    Via,
    authorize,
    is_allowed,
)
from service.auth.presign import (
    CREDENTIAL_PARAM,
    DEFAULT_EXPIRES_IN,
    EXPIRES_PARAM,
    MAX_EXPIRES_IN,
    MIN_EXPIRES_IN,
    PRESIGN_METHODS,
    SIGNATURE_PARAM,
    PresignResult,
    presign_expires_at,
    presign_query,
    sign_presigned,
    validate_expires_in,
    verify_presigned,
)
from service.auth.server_secret import SERVER_SECRET_FILENAME, load_or_create_server_secret
from service.auth.share_tokens import ShareClaims, issue_share_token, verify_share_token
from service.auth.throttle import LoginThrottle, ThrottleRule
from service.auth.tokens import TokenClaims, TokenError, issue_token, verify_token

__all__ = [
    "ACCESS_KEY_ID_PREFIX",
    "ADMIN_USERNAME",
    "CREDENTIALS_FILENAME",
    "CREDENTIAL_PARAM",
    "DEFAULT_EXPIRES_IN",
    "DEFAULT_HASHER",
    "EXPIRES_PARAM",
    "MAX_EXPIRES_IN",
    "MIN_EXPIRES_IN",
    "PRESIGN_METHODS",
    "SECRET_KEY_PREFIX",
    "SERVER_SECRET_FILENAME",
    "SIGNATURE_PARAM",
    "WWW_AUTHENTICATE",
    "AccessDeniedError",
    "AccountDisabledError",
    "Action",
    "AuthError",
    "BootstrapCredentials",
    "BootstrapError",
    "LoginThrottle",
    "PresignResult",
    "Principal",
    "Resource",
    "Role",
    "Scope",
    "ServerSecretError",
    "ShareClaims",
    "SignatureExpiredError",
    "SignatureInvalidError",
    "ThrottleRule",
    "TokenClaims",
    "TokenError",
    "UnauthorizedError",
    "Via",
    "authorize",
    "digest_secret",
    "generate_access_key",
    "hash_password",
    "is_access_key_id",
    "is_allowed",
    "is_secret_key",
    "issue_share_token",
    "issue_token",
    "load_or_create_server_secret",
    "needs_rehash",
    "parse_basic_authorization",
    "parse_bearer_authorization",
    "presign_expires_at",
    "presign_query",
    "resolve_bootstrap",
    "secret_matches",
    "sign_presigned",
    "validate_expires_in",
    "validate_password",
    "verify_password",
    "verify_presigned",
    "verify_share_token",
    "verify_token",
    "write_credentials_file",
]
