//! The `zarrfs` binary: the command line of [`zarrfs::cli`].

fn main() -> std::process::ExitCode {
    zarrfs::cli::main()
}
