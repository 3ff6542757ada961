//! The headers every answer carries for the browser: no page may be
//! framed (clickjacking), run a script or a style that is not one of the
//! server's own files, be sniffed into another type, leak its address to
//! another site, or be kept in a cache (job arguments, results and errors
//! are in them).
//!
//! One rule for every answer (pages, htmx fragments, the API, /metrics,
//! errors and refusals alike): the policy costs nothing where there is no
//! HTML to apply it to. The assets keep their own `Cache-Control` (they
//! change only with solidq's version); everything else is `no-store`.

use axum::Router;
use axum::http::{HeaderValue, header};
use tower_http::set_header::SetResponseHeaderLayer;

/// The `Content-Security-Policy` of every answer: scripts, styles,
/// requests, images and form targets from this server only, no inline
/// script or style, no `eval` (htmx runs with `allowEval: false`), no
/// plugin, no `<base>`, and no framing by any page.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; \
     base-uri 'none'; frame-ancestors 'none'";

/// `router` with the headers set on each of its answers.
pub(super) fn apply<S>(router: Router<S>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let always = |name, value: &'static str| {
        SetResponseHeaderLayer::overriding(name, HeaderValue::from_static(value))
    };
    router
        .layer(always(
            header::CONTENT_SECURITY_POLICY,
            CONTENT_SECURITY_POLICY,
        ))
        .layer(always(header::X_FRAME_OPTIONS, "DENY"))
        .layer(always(header::REFERRER_POLICY, "same-origin"))
        .layer(always(header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
}
