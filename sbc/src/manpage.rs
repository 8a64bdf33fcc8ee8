//! The manual page sbc(1), generated from the command-line definitions with `clap_mangen`, so
//! that it cannot drift from `sbc --help`: the top of the page (synopsis, description, the list
//! of subcommands), then one section per visible subcommand with its synopsis, its long
//! description and every option, then the files and environment variables of an installed
//! node. The binary prints it with the hidden subcommand `sbc man`; the package ships it
//! gzipped as `/usr/share/man/man1/sbc.1.gz`.

use std::io;

/// The files and environment of an installed node (roff), after the generated sections.
const FILES_AND_ENVIRONMENT: &str = r#".SH FILES
.TP
\fI/etc/sbc/sbc.toml\fR
The configuration the packaged service runs (a conffile; every key has a default, see
\fBsbc default\-config\fR). \fBsave\-config\fR replaces it atomically and keeps the previous
version as \fI/etc/sbc/sbc.toml.bak\fR, both mode 0600.
.TP
\fI/run/sbc/sbc.sock\fR
The management socket of the packaged service, and the default of \fBsbc acli\fR run as root.
.TP
\fI/usr/lib/systemd/system/sbc.service\fR
The unit: \fBsystemctl reload sbc\fR runs \fBactivate\-config\fR through the management socket.
.TP
\fI/usr/share/snmp/mibs/SBC\-PAIR\-MIB.txt\fR
The MIB of the traps and of the objects the SNMP agent serves.
.SH ENVIRONMENT
.TP
\fBSBC_MGMT_SOCKET\fR
The management socket, for \fBsbc run\fR and \fBsbc acli\fR (as \fB\-\-mgmt\-socket\fR).
.TP
\fBSBC_SHARED_KEY\fR
The pair's shared key, for \fBsbc witness\fR when neither \fB\-\-key\-file\fR nor
\fB\-\-config\fR is given.
.TP
\fBRUST_LOG\fR
The log filter (default \fBinfo\fR); logs go to standard error.
.TP
\fBNOTIFY_SOCKET\fR
Set by systemd: \fBsbc run\fR sends READY=1 once bound (alone) or once the pair has settled.
.SH SEE ALSO
\fBsystemctl\fR(1), \fBjournalctl\fR(1), \fBsnmpwalk\fR(1), /usr/share/doc/sbc/README.md
"#;

/// Renders sbc(1) as roff from the top-level command `cmd` (the binary's `Cli::command()`).
///
/// # Errors
/// Only those of writing to memory, which do not happen; the signature is `clap_mangen`'s.
pub fn render(cmd: clap::Command) -> io::Result<Vec<u8>> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let subcommands: Vec<&clap::Command> =
        cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    let top = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    top.render_title(&mut out)?;
    top.render_name_section(&mut out)?;
    top.render_synopsis_section(&mut out)?;
    top.render_description_section(&mut out)?;
    top.render_options_section(&mut out)?;
    // The list of subcommands, each with its own section below (clap_mangen's list would name
    // one page per subcommand, sbc-run(1) and so on, which this one page replaces).
    out.extend_from_slice(b".SH COMMANDS\n");
    for sub in &subcommands {
        let about = sub.get_about().map(ToString::to_string).unwrap_or_default();
        out.extend_from_slice(
            format!(
                ".TP\n\\fB{}\\fR\n{}\n",
                escape(&bin_name(sub)),
                escape(&about)
            )
            .as_bytes(),
        );
    }
    for sub in &subcommands {
        out.extend_from_slice(format!(".SH \"{}\"\n", bin_name(sub).to_uppercase()).as_bytes());
        let man = clap_mangen::Man::new((*sub).clone());
        let mut section = Vec::new();
        man.render_synopsis_section(&mut section)?;
        man.render_description_section(&mut section)?;
        if sub.get_arguments().any(|a| !a.is_hide_set()) {
            man.render_options_section(&mut section)?;
        }
        out.extend_from_slice(&demote_sections(&section));
    }
    top.render_version_section(&mut out)?;
    out.extend_from_slice(FILES_AND_ENVIRONMENT.as_bytes());
    Ok(out)
}

/// `sbc run` for the subcommand `run` of a built command.
fn bin_name(sub: &clap::Command) -> String {
    sub.get_bin_name()
        .unwrap_or_else(|| sub.get_name())
        .to_owned()
}

/// Text safe in a roff line: backslashes and minus signs escaped, no leading control character.
fn escape(text: &str) -> String {
    let text = text.replace('\\', "\\e").replace('-', "\\-");
    if text.starts_with(['.', '\'']) {
        format!("\\&{text}")
    } else {
        text
    }
}

/// Turns the `.SH` headings of a subcommand's sections into `.SS` subheadings, so that each
/// subcommand is one section of the page.
fn demote_sections(roff: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(roff.len());
    for line in roff.split_inclusive(|&b| b == b'\n') {
        match line.strip_prefix(b".SH ") {
            Some(rest) => {
                out.extend_from_slice(b".SS ");
                out.extend_from_slice(rest);
            }
            None => out.extend_from_slice(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> clap::Command {
        clap::Command::new("sbc")
            .version("1.2.3")
            .about("An SBC")
            .subcommand(
                clap::Command::new("run")
                    .about("Run one node")
                    .arg(clap::Arg::new("config").long("config").help("The file")),
            )
            .subcommand(clap::Command::new("acli").about("The shell"))
            .subcommand(clap::Command::new("man").about("This page").hide(true))
    }

    #[test]
    fn every_visible_subcommand_has_a_section_with_its_options() {
        let page = String::from_utf8(render(sample()).expect("rendered")).expect("UTF-8");
        assert!(page.contains("\n.TH sbc 1 "), "{page}");
        assert!(page.contains(".SH \"SBC RUN\"\n"), "{page}");
        assert!(page.contains(".SH \"SBC ACLI\"\n"), "{page}");
        assert!(
            !page.contains("SBC MAN"),
            "hidden subcommand documented: {page}"
        );
        let run = &page[page.find(".SH \"SBC RUN\"").expect("run section")..];
        assert!(run.contains(".SS SYNOPSIS"), "{run}");
        assert!(run.contains("config"), "{run}");
        assert!(run.contains("The file"), "{run}");
        assert!(
            page.contains(".SH COMMANDS\n.TP\n\\fBsbc run\\fR\nRun one node\n"),
            "{page}"
        );
        assert!(
            !page.contains("sbc-run(1)"),
            "a page that does not exist: {page}"
        );
        assert!(page.contains(".SH FILES"), "{page}");
        assert!(page.contains(".SH ENVIRONMENT"), "{page}");
    }

    #[test]
    fn text_is_escaped_for_roff() {
        assert_eq!(escape("a-b \\ c"), "a\\-b \\e c");
        assert_eq!(escape(".x"), "\\&.x");
    }

    #[test]
    fn only_line_leading_headings_are_demoted() {
        let out = demote_sections(b".SH SYNOPSIS\ntext .SH not a heading\n.SH OPTIONS\n");
        assert_eq!(
            out,
            b".SS SYNOPSIS\ntext .SH not a heading\n.SS OPTIONS\n".to_vec()
        );
    }
}
