//! Listings: ListObjectsV2.

use bytes::Bytes;
use http::header::HeaderMap;
use http::Method;

use super::S3Client;
use crate::http as h;
use crate::{Error, ListOptions, ListPage, Result};

impl S3Client {
    /// `GET /bucket?list-type=2`: one page of keys.
    ///
    /// ```no_run
    /// # async fn demo(s3: hipobj_s3::S3Client) -> hipobj_s3::Result<()> {
    /// use hipobj_s3::ListOptions;
    /// let mut opts = ListOptions { prefix: Some("dir/".into()), delimiter: Some("/".into()), ..Default::default() };
    /// loop {
    ///     let page = s3.list_objects_v2("bucket", &opts).await?;
    ///     for o in &page.objects { println!("{} {}", o.size, o.key); }
    ///     for p in &page.common_prefixes { println!("PRE {p}"); }
    ///     if !page.is_truncated { break; }
    ///     opts.continuation_token = page.next_continuation_token;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_objects_v2(&self, bucket: &str, opts: &ListOptions) -> Result<ListPage> {
        h::check_bucket(bucket)?;
        let max = opts.max_keys.map(|m| m.to_string());
        // Sorted by name, as the canonical request wants them anyway.
        let mut q: Vec<(&str, Option<&str>)> = vec![("list-type", Some("2"))];
        if let Some(t) = &opts.continuation_token {
            q.push(("continuation-token", Some(t)));
        }
        if let Some(d) = &opts.delimiter {
            q.push(("delimiter", Some(d)));
        }
        if let Some(m) = &max {
            q.push(("max-keys", Some(m)));
        }
        if let Some(p) = &opts.prefix {
            q.push(("prefix", Some(p)));
        }
        if let Some(s) = &opts.start_after {
            q.push(("start-after", Some(s)));
        }
        q.sort_by(|a, b| a.0.cmp(b.0));
        let a = self
            .plain(
                Method::GET,
                &h::path_query(bucket, None, &q),
                &HeaderMap::new(),
                Bytes::new(),
            )
            .await?
            .ok()?;
        crate::xml::list_objects(&String::from_utf8_lossy(&a.body)).map_err(Error::Protocol)
    }
}
