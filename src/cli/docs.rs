//! The man page (`zarrfs man`, from clap_mangen) and shell completions
//! (`zarrfs completions bash|zsh|fish`, from clap_complete), both generated from the
//! clap definition of the command line.

use std::io::Write;

use clap_complete::Shell;

/// The man page in roff: the command, its options and its subcommands with their
/// options.
pub fn man_page(cmd: clap::Command) -> std::io::Result<Vec<u8>> {
    let mut cmd = cmd;
    cmd.build();
    let mut out = Vec::new();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    let subs: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .collect();
    // A summary of the subcommands; each has its own section below.
    writeln!(out, ".SH COMMANDS")?;
    for sub in &subs {
        writeln!(out, ".TP\n\\fBzarrfs {}\\fR", sub.get_name())?;
        if let Some(about) = sub.get_about() {
            writeln!(out, "{}", roff_text(&about.to_string()))?;
        }
    }
    for sub in subs {
        let name = sub.get_name();
        writeln!(out, ".SH \"zarrfs {name}\"")?;
        if let Some(about) = sub.get_about() {
            writeln!(out, "{}", roff_text(&about.to_string()))?;
        }
        // After build(), its bin name is `zarrfs NAME`, which the synopsis shows.
        let sub_man = clap_mangen::Man::new(sub.clone());
        let mut section = Vec::new();
        sub_man.render_synopsis_section(&mut section)?;
        sub_man.render_options_section(&mut section)?;
        // Nested under this subcommand's heading: its sections become subsections.
        let text = String::from_utf8_lossy(&section).replace(".SH ", ".SS ");
        out.extend_from_slice(text.as_bytes());
    }
    out.extend_from_slice(FSTAB_SECTION.as_bytes());
    man.render_version_section(&mut out)?;
    Ok(out)
}

/// How mount(8) and fstab run zarrfs, in roff.
const FSTAB_SECTION: &str = r#".SH "MOUNT(8) AND FSTAB"
mount(8) runs \fBzarrfs STORE MOUNTPOINT \-o OPTIONS\fR through mount.fuse3 for the type
\fBfuse.zarrfs\fR. Every flag of \fBzarrfs mount\fR is also an option (\fBorder=F\fR,
\fBcache_size=2GiB\fR, \fBlog_file=PATH\fR; \fB_\fR for \fB\-\fR in the name, \fB:\fR between the
values of a list); options of mount(8), fstab and systemd (\fBro\fR, \fBrw\fR, \fBdefaults\fR,
\fB_netdev\fR, \fBnofail\fR, \fBx\-systemd.*\fR, ...) are ignored. An /etc/fstab line:
.PP
.nf
/data/ocean.zarr  /mnt/ocean  fuse.zarrfs  ro,allow_other,order=F,cache_size=2GiB,nofail  0 0
.fi
.PP
A background daemon logs to \fB\-\-log\-file\fR, else to syslog (facility daemon);
with \fB\-f\fR it logs to stderr.
"#;

/// Plain text for a roff line: a leading `.` or `'` would be a request.
fn roff_text(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

/// The completion script for `shell`, in memory (clap_complete panics on a closed pipe
/// when it writes to stdout itself).
pub fn completions(cmd: clap::Command, shell: Shell) -> Vec<u8> {
    let mut cmd = cmd;
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "zarrfs", &mut out);
    out
}
