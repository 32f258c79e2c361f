//! The shop's binary: drover's CLI with the shop in it, and the shop's own
//! three commands.
//!
//! ```text
//! shop place URL CUSTOMER CENTS    places an order (prints its id)
//! shop pay URL ORDER               the payment provider's webhook
//! shop order URL ORDER             an order's status
//! shop [drover's options] COMMAND  drover's CLI with the shop's handlers,
//!                                  projector, schedule and saga: worker,
//!                                  handlers, schedules, projector, …
//! ```

use std::process::ExitCode;

use uuid::Uuid;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let own = match args.get(1).map(String::as_str) {
        Some("place") => Some(place(&args[2..]).await),
        Some("pay") => Some(pay(&args[2..]).await),
        Some("order") => Some(order(&args[2..]).await),
        _ => None,
    };
    match own {
        Some(Ok(())) => ExitCode::SUCCESS,
        Some(Err(e)) => {
            eprintln!("shop: {e}");
            ExitCode::FAILURE
        }
        // Everything else is drover's: the CLI builds its workers with the
        // shop's setup, so `shop handlers` prints the shop's strategies and
        // `shop schedules trigger daily-sales` finds the schedule.
        None => drover_cli::run_with(args, shop::setup).await,
    }
}

/// `place URL CUSTOMER CENTS`: one order, in one transaction.
async fn place(args: &[String]) -> Result<(), String> {
    let [url, customer, cents] = args else {
        return Err("usage: shop place URL CUSTOMER CENTS".into());
    };
    let cents: i64 = cents.parse().map_err(|e| format!("CENTS: {e}"))?;
    let queue = shop::open(url).await.map_err(|e| e.to_string())?;
    let mut tx = queue.begin().await.map_err(|e| e.to_string())?;
    let id = shop::place_order(&queue, &mut tx.conn(), customer, cents)
        .await
        .map_err(|e| e.to_string())?;
    tx.commit().await.map_err(|e| e.to_string())?;
    #[allow(clippy::print_stdout)]
    {
        println!("{id}");
    }
    Ok(())
}

/// `pay URL ORDER`: the payment provider confirms the order's payment.
async fn pay(args: &[String]) -> Result<(), String> {
    let [url, order] = args else {
        return Err("usage: shop pay URL ORDER".into());
    };
    let order = Uuid::parse_str(order).map_err(|e| format!("ORDER: {e}"))?;
    let queue = shop::open(url).await.map_err(|e| e.to_string())?;
    shop::confirm_payment(&queue, order)
        .await
        .map_err(|e| e.to_string())
}

/// `order URL ORDER`: prints the order's status.
async fn order(args: &[String]) -> Result<(), String> {
    let [url, order] = args else {
        return Err("usage: shop order URL ORDER".into());
    };
    let order = Uuid::parse_str(order).map_err(|e| format!("ORDER: {e}"))?;
    let queue = shop::open(url).await.map_err(|e| e.to_string())?;
    let status = shop::order_status(&queue, order)
        .await
        .map_err(|e| e.to_string())?;
    #[allow(clippy::print_stdout)]
    {
        println!("{status}");
    }
    Ok(())
}
