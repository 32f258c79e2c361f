//! `drover lane pause|resume|list`: steer lanes. A paused lane keeps its
//! items waiting: every worker stops claiming from it within one poll
//! interval, and claims again within one poll interval of the resume.
//! The CLI acts as the system principal (it holds the database login).

use chrono::SecondsFormat;
use drover::lane::LaneState;
use drover::queue::Principal;

use crate::{CliError, Context, table};

/// Arguments of `drover lane`.
#[derive(Debug, Clone, clap::Args)]
pub struct LaneArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: LaneAction,
}

/// `drover lane …` actions.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum LaneAction {
    /// Pause a lane: workers stop claiming from it (persisted).
    Pause {
        /// The lane.
        lane: String,
        /// Print the lane's state as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Resume a paused lane: workers claim from it again.
    Resume {
        /// The lane.
        lane: String,
        /// Print the lane's state as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List every lane with a recorded state (a lane never paused runs and
    /// is not listed).
    List {
        /// Print a JSON array instead of the table.
        #[arg(long)]
        json: bool,
    },
}

fn state_word(l: &LaneState) -> &'static str {
    if l.paused { "paused" } else { "running" }
}

/// Runs `drover lane`.
///
/// # Errors
/// [`CliError::Drover`] with `InvalidInput` on a malformed lane (exit 2);
/// storage errors.
///
/// # Cancel safety
/// A pause or resume is one statement: dropped, it either landed or not.
pub async fn run(args: &LaneArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let queue = cx.queue().await?;
    let system = Principal::system();
    let (changed, json) = match &args.action {
        LaneAction::Pause { lane, json } => (queue.lane_pause(&system, lane).await?, *json),
        LaneAction::Resume { lane, json } => (queue.lane_resume(&system, lane).await?, *json),
        LaneAction::List { json } => {
            let lanes = queue.lane_list().await?;
            table::listing(
                cx.out,
                *json,
                &lanes,
                None,
                &["LANE", "STATE", "SINCE", "BY"],
                |l| {
                    vec![
                        l.lane.clone(),
                        state_word(l).to_owned(),
                        l.changed_at.to_rfc3339_opts(SecondsFormat::Secs, true),
                        l.changed_by.to_string(),
                    ]
                },
            )?;
            return Ok(());
        }
    };
    if json {
        let v = serde_json::to_string(&changed).map_err(crate::table::json_err)?;
        writeln!(cx.out, "{v}")?;
    } else {
        writeln!(cx.out, "lane {} {}", changed.lane, state_word(&changed))?;
    }
    Ok(())
}
