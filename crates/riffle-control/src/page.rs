//! The web page's files, compiled into the binary: it works offline and needs nothing
//! but the job. Plain HTML, CSS and JavaScript (`page/`), no build step.

/// One file of the page.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Asset {
    pub content_type: &'static str,
    pub body: &'static str,
}

static INDEX: Asset = Asset {
    content_type: "text/html; charset=utf-8",
    body: include_str!("page/index.html"),
};
static SCRIPT: Asset = Asset {
    content_type: "text/javascript; charset=utf-8",
    body: include_str!("page/app.js"),
};
static STYLE: Asset = Asset {
    content_type: "text/css; charset=utf-8",
    body: include_str!("page/style.css"),
};

/// The file served at `path`, if the page has one there.
pub(super) fn asset(path: &str) -> Option<&'static Asset> {
    match path {
        "/" | "/index.html" => Some(&INDEX),
        "/app.js" => Some(&SCRIPT),
        "/style.css" => Some(&STYLE),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_links_only_files_it_serves() {
        for linked in ["/app.js", "/style.css"] {
            assert!(INDEX.body.contains(linked), "{linked}");
            assert!(asset(linked).is_some(), "{linked}");
        }
        assert_eq!(asset("/"), asset("/index.html"));
        assert_eq!(asset("/secret"), None);
    }
}
