//! The command line as mount(8), fstab and `mount.fuse3` write it, turned into the
//! subcommand form before clap parses it: `zarrfs STORE DIR -o OPTIONS` is a mount, every
//! flag of `mount` (and of `serve`) is also an `-o key=value` option (`_` for `-` in the key; `:` between the
//! values of a list flag, since `,` separates options), and the options that belong to
//! mount(8), fstab or systemd are dropped. What is left of `-o` goes to FUSE and the store.

use std::ffi::OsString;

/// Options of mount(8), fstab and systemd, meaningless to a read-only FUSE daemon (it is
/// always `ro,nodev,nosuid`): dropped.
const DROPPED: &[&str] = &[
    "_netdev", "nofail", "noauto", "auto", "user", "users", "nouser", "owner", "group", "defaults",
    "rw", "ro", "dev", "nodev", "suid", "nosuid", "async", "sync",
];

fn is_dropped(key: &str) -> bool {
    DROPPED.contains(&key) || key.starts_with("x-") || key == "comment"
}

/// Rewrite `argv` (program name first) for clap: the bare form gets `mount` inserted, and
/// the `-o` lists of a mount or a serve give their flags as `--flag[=value]`.
pub fn normalize(argv: Vec<OsString>, cli: &clap::Command) -> Result<Vec<OsString>, String> {
    let mut args = argv.into_iter();
    let mut out: Vec<OsString> = args.next().into_iter().collect();
    let rest: Vec<OsString> = args.collect();
    let first = rest.first().and_then(|a| a.to_str());
    let bare = match first {
        None => false,
        Some(a) => !a.starts_with('-') && a != "help" && cli.find_subcommand(a).is_none(),
    };
    let non_utf8_first = rest.first().is_some_and(|a| a.to_str().is_none());
    let command = if bare || non_utf8_first {
        out.push("mount".into());
        "mount"
    } else {
        match first.and_then(|a| cli.find_subcommand(a)) {
            Some(cmd) if takes_flag_options(cmd) => cmd.get_name(),
            _ => {
                out.extend(rest);
                return Ok(out);
            }
        }
    };
    out.extend(rest);
    let cmd = cli
        .find_subcommand(command)
        .ok_or_else(|| format!("no {command} subcommand"))?;
    expand_options(out, cmd)
}

/// The commands whose `-o` lists may name their flags: `mount` (as mount(8) runs it) and
/// `serve`, which takes the same flags for what the tree shows.
fn takes_flag_options(cmd: &clap::Command) -> bool {
    matches!(cmd.get_name(), "mount" | "serve")
}

/// Replace each `-o LIST` (or `-oLIST`) of a mount or serve command line by the flags of
/// that command it names and one `-o` with the rest.
fn expand_options(args: Vec<OsString>, command: &clap::Command) -> Result<Vec<OsString>, String> {
    let mut out = Vec::with_capacity(args.len());
    let mut flags = Vec::new();
    let mut kept: Vec<String> = Vec::new();
    let mut iter = args.into_iter();
    while let Some(arg) = iter.next() {
        let list = match arg.to_str() {
            Some("--") => {
                out.push(arg);
                out.extend(iter.by_ref());
                break;
            }
            Some("-o") => match iter.next() {
                Some(v) => v
                    .into_string()
                    .map_err(|v| format!("-o {}: not UTF-8", v.to_string_lossy()))?,
                None => return Err("-o: needs a list of options".into()),
            },
            Some(s) if s.starts_with("-o") => s[2..].to_string(),
            _ => {
                out.push(arg);
                continue;
            }
        };
        for item in list.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (item, None),
            };
            if is_dropped(key) {
                continue;
            }
            match flag_of(command, key) {
                Some(arg) => flags.extend(as_flag(arg, key, value)?),
                None => kept.push(item.to_string()),
            }
        }
    }
    // Flags go before a `--`, if any.
    let at = out.iter().position(|a| a == "--").unwrap_or(out.len());
    let mut tail = out.split_off(at);
    out.extend(flags.into_iter().map(OsString::from));
    if !kept.is_empty() {
        out.push("-o".into());
        out.push(kept.join(",").into());
    }
    out.append(&mut tail);
    Ok(out)
}

/// The flag of `command` an `-o` key names: its long name with `_` for `-`.
fn flag_of<'a>(command: &'a clap::Command, key: &str) -> Option<&'a clap::Arg> {
    let long = key.replace('_', "-");
    if long == "help" || long == "version" {
        return None;
    }
    command.get_arguments().find(|a| {
        a.get_long() == Some(long.as_str())
            || a.get_all_aliases()
                .is_some_and(|aliases| aliases.contains(&long.as_str()))
    })
}

/// `--flag=VALUE`, or `--flag` for a switch (`key`, `key=true`; `key=false` is nothing).
fn as_flag(arg: &clap::Arg, key: &str, value: Option<&str>) -> Result<Option<String>, String> {
    let long = arg.get_long().unwrap_or(key);
    if arg.get_action().takes_values() {
        let value = value
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("-o {key}: needs a value ({key}=...)"))?;
        // Within an -o list, `:` separates the values of a list flag.
        let value = if arg.get_value_delimiter() == Some(',') {
            value.replace(':', ",")
        } else {
            value.to_string()
        };
        return Ok(Some(format!("--{long}={value}")));
    }
    match value.map(str::to_ascii_lowercase).as_deref() {
        None | Some("true" | "yes" | "1") => Ok(Some(format!("--{long}"))),
        Some("false" | "no" | "0") => Ok(None),
        Some(other) => Err(format!("-o {key}={other}: {key} takes no value")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    fn norm(args: &[&str]) -> Result<Vec<String>, String> {
        let argv = std::iter::once("zarrfs")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        normalize(argv, &crate::cli::Cli::command())
            .map(|v| v.into_iter().map(|a| a.into_string().unwrap()).collect())
    }

    fn parse(args: &[&str]) -> crate::cli::Cli {
        let argv = norm(args).unwrap();
        crate::cli::Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    #[test]
    fn the_bare_form_is_a_mount() {
        assert_eq!(
            norm(&["data.zarr", "/mnt/x"]).unwrap(),
            ["zarrfs", "mount", "data.zarr", "/mnt/x"]
        );
        assert_eq!(
            norm(&["s3://b/d.zarr", "/mnt/x", "-o", "ro,allow_other"]).unwrap(),
            [
                "zarrfs",
                "mount",
                "s3://b/d.zarr",
                "/mnt/x",
                "-o",
                "allow_other"
            ]
        );
    }

    #[test]
    fn subcommands_and_global_flags_are_left_alone() {
        for args in [
            &["cat", "s", "a", "-o", "endpoint=http://x:9000"][..],
            &["inspect", "s", "-o", "order=F"],
            &["--version"],
            &["help"],
            &["demo", "/tmp/d"],
            &[],
        ] {
            let want: Vec<String> = std::iter::once("zarrfs")
                .chain(args.iter().copied())
                .map(String::from)
                .collect();
            assert_eq!(norm(args).unwrap(), want, "{args:?}");
        }
    }

    /// `zarrfs serve` reads `-o order=F` as `--order=F`, as a mount does: not as a store
    /// option that a local store would pass over.
    #[test]
    fn serve_flags_are_options_too() {
        let got = norm(&[
            "serve",
            "s",
            "-o",
            "order=F,views=npy:tiff,http=127.0.0.1:0,endpoint=http://h:1",
        ])
        .unwrap();
        assert_eq!(
            got,
            [
                "zarrfs",
                "serve",
                "s",
                "--order=F",
                // --views reads `:` as `,` itself (it has no clap delimiter).
                "--views=npy:tiff",
                "--http=127.0.0.1:0",
                "-o",
                "endpoint=http://h:1"
            ]
        );
    }

    #[test]
    fn mount_flags_are_options_with_underscores() {
        let got = norm(&[
            "mount",
            "s",
            "/m",
            "-o",
            "order=F,cache_size=64MiB,anonymous,allow_other,endpoint=http://h:1",
        ])
        .unwrap();
        assert_eq!(
            got,
            [
                "zarrfs",
                "mount",
                "s",
                "/m",
                "--order=F",
                "--cache-size=64MiB",
                "--anonymous",
                "-o",
                "allow_other,endpoint=http://h:1"
            ]
        );
        let cli = parse(&[
            "s",
            "/m",
            "-o",
            "rw,order=F,cache_size=64MiB,max_requests=4,log_file=/tmp/a:b.log,log_level=info",
        ]);
        match cli.command {
            crate::cli::Command::Mount {
                tree,
                store_args,
                log,
                options,
                ..
            } => {
                assert!(matches!(tree.order, crate::cli::flags::OrderArg::F));
                assert_eq!(tree.cache_size, 64 << 20);
                assert_eq!(store_args.max_requests, 4);
                assert_eq!(log.log_file.as_deref(), Some("/tmp/a:b.log".as_ref()));
                assert_eq!(log.log_level, Some(log::LevelFilter::Info));
                assert!(options.is_empty(), "{options:?}");
            }
            _ => panic!("not a mount"),
        }
    }

    #[test]
    fn fstab_and_systemd_options_are_dropped() {
        let got = norm(&[
            "s",
            "/m",
            "-o",
            "defaults,_netdev,nofail,noauto,user,x-systemd.automount,x-systemd.idle-timeout=60,\
             rw,ro,dev,suid,comment=systemd.x,allow_root",
        ])
        .unwrap();
        assert_eq!(got, ["zarrfs", "mount", "s", "/m", "-o", "allow_root"]);
    }

    #[test]
    fn switches_take_boolean_values_and_valued_flags_need_one() {
        assert_eq!(
            norm(&["s", "/m", "-o", "zip=true,anonymous=false,foreground"]).unwrap(),
            ["zarrfs", "mount", "s", "/m", "--zip", "--foreground"]
        );
        assert!(norm(&["s", "/m", "-o", "zip=maybe"]).is_err());
        assert!(norm(&["s", "/m", "-o", "order"]).is_err());
        assert!(norm(&["s", "/m", "-o", "cache_size="]).is_err());
        assert!(norm(&["s", "/m", "-o"]).is_err());
    }

    #[test]
    fn several_and_attached_option_lists_merge() {
        let got = norm(&[
            "s",
            "/m",
            "-oorder=F",
            "-o",
            "allow_other",
            "-o",
            "threads=3",
        ])
        .unwrap();
        assert_eq!(
            got,
            [
                "zarrfs",
                "mount",
                "s",
                "/m",
                "--order=F",
                "--threads=3",
                "-o",
                "allow_other"
            ]
        );
        let cli = parse(&[
            "s",
            "/m",
            "-oorder=F",
            "-o",
            "allow_other",
            "-o",
            "threads=3",
        ]);
        assert!(matches!(
            cli.command,
            crate::cli::Command::Mount {
                tree: crate::cli::flags::TreeArgs {
                    threads: Some(3),
                    ..
                },
                ..
            }
        ));
    }

    #[test]
    fn list_flags_take_colon_separated_values() {
        let cmd = clap::Command::new("zarrfs").subcommand(
            clap::Command::new("mount").arg(
                clap::Arg::new("views")
                    .long("views")
                    .value_delimiter(',')
                    .action(clap::ArgAction::Append),
            ),
        );
        let argv = ["zarrfs", "s", "/m", "-o", "views=npy:tiff,allow_other"]
            .map(OsString::from)
            .to_vec();
        assert_eq!(
            normalize(argv, &cmd).unwrap(),
            [
                "zarrfs",
                "mount",
                "s",
                "/m",
                "--views=npy,tiff",
                "-o",
                "allow_other"
            ]
            .map(OsString::from)
        );
    }

    #[test]
    fn flags_stay_before_a_double_dash() {
        assert_eq!(
            norm(&["mount", "-o", "order=F", "--", "-s", "/m"]).unwrap(),
            ["zarrfs", "mount", "--order=F", "--", "-s", "/m"]
        );
    }
}
