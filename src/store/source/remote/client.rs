//! The `object_store` client for a URL's scheme: S3 (`s3://`), GCS (`gs://`), Azure
//! (`az://`, `abfs://`) and plain HTTP(S), configured from the environment the
//! ecosystem's way, the command line's store options, timeouts and retries.

use std::sync::Arc;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::http::HttpBuilder;
use object_store::{BackoffConfig, ClientConfigKey, ClientOptions, ObjectStore, RetryConfig};
use url::Url;

use crate::error::{Error, Result};
use crate::store::options::StoreConfig;

fn bad_option(url: &Url, key: &str, e: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("{}: store option {key}: {e}", url.scheme()))
}

fn retry(cfg: &StoreConfig) -> RetryConfig {
    RetryConfig {
        max_retries: cfg.retries,
        // Retries stop once this much time has gone by since the first attempt.
        retry_timeout: cfg.timeout.saturating_mul(cfg.retries as u32 + 1),
        backoff: BackoffConfig::default(),
    }
}

fn client(cfg: &StoreConfig) -> ClientOptions {
    ClientOptions::new()
        .with_timeout(cfg.timeout)
        .with_connect_timeout(cfg.timeout.min(std::time::Duration::from_secs(10)))
}

/// The store options, with `skip_signature` for `--anonymous` (unsigned requests).
fn options(cfg: &StoreConfig) -> Vec<(String, String)> {
    let mut options = cfg.options.clone();
    if cfg.anonymous {
        options.push(("skip_signature".into(), "true".into()));
    }
    options
}

/// Store options, each parsed as a configuration key `K` of the URL's backend: an
/// option that is none is refused, naming it.
pub fn config_keys<K: std::str::FromStr>(
    url: &Url,
    options: &[(String, String)],
) -> Result<Vec<(K, String)>>
where
    K::Err: std::fmt::Display,
{
    options
        .iter()
        .map(|(k, v)| match k.parse::<K>() {
            Ok(key) => Ok((key, v.clone())),
            Err(e) => Err(bad_option(url, k, e)),
        })
        .collect()
}

/// A cloud client: its builder from the environment, then the URL, timeouts, retries and
/// the store options, each parsed as one of the backend's configuration keys.
macro_rules! cloud {
    ($builder:ty, $key:ty, $url:expr, $cfg:expr) => {{
        let mut b = <$builder>::from_env()
            .with_url($url.as_str())
            .with_client_options(client($cfg))
            .with_retry(retry($cfg));
        for (key, v) in config_keys::<$key>($url, &options($cfg))? {
            b = b.with_config(key, v);
        }
        Arc::new(
            b.build()
                .map_err(|e| Error::Invalid(format!("{}: {e}", $url)))?,
        ) as Arc<dyn ObjectStore>
    }};
}

/// The client for `url` (its bucket or host; the path is the caller's prefix).
pub fn build(url: &Url, cfg: &StoreConfig) -> Result<Arc<dyn ObjectStore>> {
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Error::Invalid(format!(
            "{}://{}: credentials do not belong in the URL (they would show in `ps`); \
             set them in the environment",
            url.scheme(),
            url.host_str().unwrap_or("")
        )));
    }
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        "s3" | "s3a" => cloud!(AmazonS3Builder, AmazonS3ConfigKey, url, cfg),
        "gs" | "gcs" => cloud!(GoogleCloudStorageBuilder, GoogleConfigKey, url, cfg),
        "az" | "azure" | "abfs" | "abfss" => {
            cloud!(MicrosoftAzureBuilder, AzureConfigKey, url, cfg)
        }
        "http" | "https" => {
            // An http:// URL asks for plain HTTP.
            let mut options = client(cfg).with_allow_http(url.scheme() == "http");
            for (key, v) in config_keys::<ClientConfigKey>(url, &cfg.options)? {
                options = options.with_config(key, v);
            }
            let origin = url.origin().ascii_serialization();
            Arc::new(
                HttpBuilder::new()
                    .with_url(origin)
                    .with_client_options(options)
                    .with_retry(retry(cfg))
                    .build()
                    .map_err(|e| Error::Invalid(format!("{url}: {e}")))?,
            )
        }
        other => {
            return Err(Error::Invalid(format!(
                "{other}://: not a known store scheme"
            )))
        }
    };
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_and_store_options_reach_every_backend() {
        let s3 = StoreConfig {
            anonymous: true,
            options: vec![("endpoint".into(), "http://127.0.0.1:9".into())],
            ..StoreConfig::default()
        };
        let gs = StoreConfig {
            anonymous: true,
            ..StoreConfig::default()
        };
        for (url, cfg) in [("s3://bucket/a.zarr", &s3), ("gs://bucket/a.zarr", &gs)] {
            let url = Url::parse(url).unwrap();
            if let Err(e) = build(&url, cfg) {
                panic!("{url}: {e}");
            }
        }
        assert!("skip_signature".parse::<AzureConfigKey>().is_ok());
        let bad = StoreConfig {
            options: vec![("no_such_option".into(), "1".into())],
            ..StoreConfig::default()
        };
        let url = Url::parse("s3://bucket/a.zarr").unwrap();
        let err = build(&url, &bad)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("no_such_option"), "{err}");
    }
}
