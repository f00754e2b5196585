//! `/login`: a plain HTML form (works without JavaScript) that posts to `/auth/login`.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

#[component]
pub fn LoginPage() -> impl IntoView {
    let q = use_query_map();
    let failed = move || q.with(|q| q.get("error").is_some());
    let next = move || {
        q.with(|q| q.get("next"))
            .and_then(|n| crate::nav::safe_next(&n))
            .unwrap_or_else(|| "/".into())
    };
    view! {
        <Title text="Sign in"/>
        <div class="login">
            <h1>"Sign in to Gantry"</h1>
            <Show when=failed>
                <p class="error" role="alert" data-test="login-error">
                    "Wrong user name or password."
                </p>
            </Show>
            <form method="post" action="/auth/login" class="login-form">
                <input type="hidden" name="next" value=next/>
                <label for="login-name">"User name"</label>
                <input id="login-name" name="name" type="text" autocomplete="username" required autofocus/>
                <label for="login-password">"Password"</label>
                <input id="login-password" name="password" type="password" autocomplete="current-password" required/>
                <button type="submit" class="primary">"Sign in"</button>
            </form>
        </div>
    }
}
