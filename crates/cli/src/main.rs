//! `cachesched`: cache-aware scheduling on a simulated machine or a real Linux host.

mod replay_cmd;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Cache-aware operating-system scheduling for multicore processors.
#[derive(Parser, Debug)]
#[command(name = "cachesched", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Replay a valgrind lackey trace through an I1/D1/LL hierarchy with cachegrind's
    /// rules and print cachegrind's `events:`/`summary:` lines.
    Replay(replay_cmd::ReplayArgs),
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Replay(a) => replay_cmd::run(a),
    }
}
