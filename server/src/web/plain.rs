//! Plain pages the server answers outside the app, for a browser that left a form or came
//! back from a provider: a sign-in that moves on by itself, a sign-in refused for now.
//! Leptos views rendered to HTML on the spot (escaped by Leptos), with no script: they
//! hydrate nothing.

use leptos::prelude::*;

// Each page is one view, its title a literal of it: a title passed in as a value would
// carry Leptos' hydration marker (`<!>`) inside `<title>`, whose text is not parsed.

/// Signed in as `name` through single sign-on: on to `target` at once (a page, not a
/// redirect, so the browser sends the `SameSite=Strict` session cookie there).
pub(super) fn signed_in(name: &str, target: &str) -> String {
    let refresh = format!("0;url={target}");
    let (name, target) = (name.to_string(), target.to_string());
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta http-equiv="refresh" content=refresh/>
                <title>"Signed in · Gantry"</title>
                <link rel="stylesheet" href="/pkg/gantry.css"/>
            </head>
            <body>
                <main class="login">
                    <h1>"Signed in"</h1>
                    <p>
                        "Signed in as " {name} ". "
                        <a href=target data-test="sso-continue">"Continue"</a>
                    </p>
                </main>
            </body>
        </html>
    }
    .to_html()
}

/// A sign-in refused for now, saying why and when to try again.
pub(super) fn try_later(message: String) -> String {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <title>"Sign in · Gantry"</title>
                <link rel="stylesheet" href="/pkg/gantry.css"/>
            </head>
            <body>
                <main class="login">
                    <h1>"Sign in to Gantry"</h1>
                    <p class="error" role="alert" data-test="login-throttled">{message}</p>
                    <p><a href="/login">"Back to sign-in"</a></p>
                </main>
            </body>
        </html>
    }
    .to_html()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signed_in_page_moves_on_and_escapes_what_it_shows() {
        let page = signed_in("al<i>ce", "/racks?row=a&x=\"1\"");
        assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
        assert!(page.contains("url=/racks"), "{page}");
        assert!(page.contains("data-test=\"sso-continue\""), "{page}");
        assert!(page.contains("Signed in as "), "{page}");
        assert!(!page.contains("<i>"), "{page}");
        assert!(!page.contains("x=\"1\""), "{page}");
        assert!(!page.contains("<script"), "{page}");
        assert!(page.contains("<title>Signed in · Gantry</title>"), "{page}");
    }

    #[test]
    fn the_try_later_page_says_why() {
        let page = try_later("Too many failed sign-ins. Try again in 3 seconds.".into());
        assert!(page.contains("data-test=\"login-throttled\""), "{page}");
        assert!(page.contains("Try again in 3 seconds."), "{page}");
        assert!(page.contains("<title>Sign in · Gantry</title>"), "{page}");
    }
}
