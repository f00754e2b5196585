//! `/login`: a plain HTML form (works without JavaScript) that posts to `/auth/login`.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// The single sign-on button's words, or `None` when no OpenID provider is configured
/// (public, and a GET: the sign-in page asks before anyone is signed in, and public routes
/// only read).
#[server(endpoint = "sign_in_options", input = leptos::server_fn::codec::GetUrl)]
pub async fn sign_in_options() -> Result<Option<String>, ServerFnError> {
    Ok(crate::backend::backend()?.single_sign_on())
}

#[component]
pub fn LoginPage() -> impl IntoView {
    let sso = Resource::new(|| (), |_| sign_in_options());
    let q = use_query_map();
    // `error=1`: wrong name or password; `norole`: the directory knows the user but gives
    // no role; `directory`: the directory did not answer (local accounts still work).
    let failed = move || q.with(|q| q.get("error"));
    let next = move || {
        q.with(|q| q.get("next"))
            .and_then(|n| crate::nav::safe_next(&n))
            .unwrap_or_else(|| "/".into())
    };
    view! {
        <Title text="Sign in"/>
        <div class="login">
            <h1>"Sign in to Gantry"</h1>
            {move || failed().map(|e| {
                let text = match e.as_str() {
                    "norole" => "Your directory account has no Gantry role: ask a Gantry admin to map one of your groups to a role.",
                "sso" => "Single sign-on could not finish: try again. Local accounts can still sign in.",
                "denied" => "Single sign-on was cancelled or refused at the provider.",
                    "directory" => "The directory cannot be reached now: try again shortly. Local accounts can still sign in.",
                    _ => "Wrong user name or password.",
                };
                view! { <p class="error" role="alert" data-test="login-error">{text}</p> }
            })}
            <form method="post" action="/auth/login" class="login-form">
                <input type="hidden" name="next" value=next/>
                <label for="login-name">"User name"</label>
                <input id="login-name" name="name" type="text" autocomplete="username" required autofocus/>
                <label for="login-password">"Password"</label>
                <input id="login-password" name="password" type="password" autocomplete="current-password" required/>
                <button type="submit" class="primary">"Sign in"</button>
            </form>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    sso.await.ok().flatten().map(|label| {
                        let href = format!("/auth/oidc/login?next={}", crate::nav::query_encode(&next()));
                        view! {
                            <p class="sso"><a class="button" href=href rel="external" data-test="sso">{label}</a></p>
                        }
                    })
                })}
            </Suspense>
        </div>
    }
}
