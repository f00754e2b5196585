//! The colour theme: dark (the default: the live pages on a screen in a dim room) or light
//! (daylight, a manager's desk), chosen by each user with the top bar's button and kept in
//! a cookie that the server reads when it renders the document (`<html data-theme>`), so
//! the first paint is already right. Print is light whatever the choice.

use leptos::prelude::*;

/// The cookie that keeps the choice (`dark` or `light`; anything else is dark).
pub const COOKIE: &str = "gantry_theme";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Theme {
    Dark,
    Light,
}

impl Theme {
    pub fn as_str(self) -> &'static str {
        match self {
            Theme::Dark => "dark",
            Theme::Light => "light",
        }
    }

    pub fn parse(s: &str) -> Option<Theme> {
        match s {
            "dark" => Some(Theme::Dark),
            "light" => Some(Theme::Light),
            _ => None,
        }
    }

    /// The theme a request's `Cookie` headers choose (dark when they choose none).
    pub fn of_cookies<'a>(headers: impl IntoIterator<Item = &'a str>) -> Theme {
        headers
            .into_iter()
            .flat_map(|h| h.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
            .find(|(k, _)| *k == COOKIE)
            .and_then(|(_, v)| Theme::parse(v))
            .unwrap_or(Theme::Dark)
    }

    fn other(self) -> Theme {
        match self {
            Theme::Dark => Theme::Light,
            Theme::Light => Theme::Dark,
        }
    }

    /// The theme of the page being rendered: on the server, the request's cookie; in the
    /// browser, the one the server rendered into `<html data-theme>`.
    pub fn current() -> Theme {
        #[cfg(feature = "ssr")]
        {
            use_context::<http::request::Parts>()
                .map(|p| {
                    Theme::of_cookies(
                        p.headers
                            .get_all(http::header::COOKIE)
                            .iter()
                            .filter_map(|v| v.to_str().ok()),
                    )
                })
                .unwrap_or(Theme::Dark)
        }
        #[cfg(all(feature = "hydrate", not(feature = "ssr")))]
        {
            document()
                .document_element()
                .and_then(|e| e.get_attribute("data-theme"))
                .and_then(|t| Theme::parse(&t))
                .unwrap_or(Theme::Dark)
        }
        #[cfg(not(any(feature = "ssr", feature = "hydrate")))]
        {
            Theme::Dark
        }
    }
}

/// The top bar's button that switches to the other theme: a form posted to `/theme`
/// (which sets the cookie and sends the browser back to this page), so it works before
/// the page's script has loaded and without it.
#[component]
pub fn ThemeToggle() -> impl IntoView {
    let loc = leptos_router::hooks::use_location();
    let theme = Theme::current();
    let back = move || {
        let search = loc.search.get();
        match search.as_str() {
            "" | "?" => loc.pathname.get(),
            s if s.starts_with('?') => format!("{}{s}", loc.pathname.get()),
            s => format!("{}?{s}", loc.pathname.get()),
        }
    };
    let label = match theme {
        Theme::Dark => "Light theme",
        Theme::Light => "Dark theme",
    };
    view! {
        <form method="post" action="/theme" class="inline theme-toggle">
            <input type="hidden" name="theme" value=theme.other().as_str()/>
            <input type="hidden" name="back" value=back/>
            <button type="submit" class="link" data-test="theme-toggle"
                title=format!("Show every page in the {} theme (print is always light)", theme.other().as_str())>
                {label}
            </button>
        </form>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_chooses_light_and_anything_else_is_dark() {
        let of = |h: &str| Theme::of_cookies([h]);
        assert_eq!(of("gantry_theme=light"), Theme::Light);
        assert_eq!(of("gantry_session=ab; gantry_theme=light"), Theme::Light);
        assert_eq!(
            Theme::of_cookies(["gantry_session=ab", "gantry_theme=light"]),
            Theme::Light
        );
        assert_eq!(of("gantry_theme=dark"), Theme::Dark);
        assert_eq!(of("gantry_theme=LIGHT"), Theme::Dark);
        assert_eq!(of("gantry_theme=<x>"), Theme::Dark);
        assert_eq!(of("other=light"), Theme::Dark);
        assert_eq!(of(""), Theme::Dark);
        assert_eq!(Theme::of_cookies([]), Theme::Dark);
    }
}
