//! The page's files, compiled into the binary (`assets/`): plain HTML, CSS
//! and JavaScript, with nothing fetched from elsewhere, so the console
//! works on a network without the internet and serves the version of the
//! node it ships with.

/// A file of the page.
pub(crate) struct Asset {
    /// Where it is served.
    pub path: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its text.
    pub body: &'static str,
}

/// Every file of the page; `index.html` is served at `/`.
pub(crate) static ASSETS: [Asset; 3] = [
    Asset {
        path: "/",
        content_type: "text/html; charset=utf-8",
        body: include_str!("assets/index.html"),
    },
    Asset {
        path: "/console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/console.js"),
    },
    Asset {
        path: "/console.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("assets/console.css"),
    },
];
