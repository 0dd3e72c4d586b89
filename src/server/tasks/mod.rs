//! Durable background tasks and scheduled automations (`/v1/tasks`,
//! `/v1/automations`, the `task/*` and `automation/*` stdio methods;
//! docs/RUNTIME_API.md).
//!
//! A task is a prompt run as its own runtime thread by one of
//! `--task-workers` workers ([`queue`], [`runner`]); an automation turns
//! the slots of its schedule ([`planner`], pure) into tasks
//! ([`scheduler`]), reading time through one seam ([`clock`]). Records are
//! one JSON file each, replaced atomically ([`durable`]). The transports
//! are thin: [`http`] and [`api::rpc`] over the typed functions of
//! [`api`].

pub mod api;
pub mod automation;
pub mod clock;
pub mod durable;
pub mod owner;
pub mod planner;
pub mod queue;
mod runner;
pub mod scheduler;
pub mod task;

use crate::runtime::driver::Driver;
use std::path::Path;
use std::time::Duration;

/// The task queue and the automations, when this process runs them.
pub struct Active {
    pub tasks: queue::Tasks,
    pub automations: scheduler::Automations,
}

/// The tasks and automations of one server process: [`Active`], or why
/// another process has them ([`owner`]).
pub struct Hub {
    active: Result<Active, String>,
    _lock: Option<owner::HubLock>,
}

/// How the server runs tasks and automations (its flags).
#[derive(Clone, Debug)]
pub struct HubOptions {
    pub workers: usize,
    pub tick: Duration,
    pub defaults: queue::Defaults,
}

impl Hub {
    /// Load both stores under the state home `home` (recovering what a
    /// dead process left) and start the workers and the scheduler — unless
    /// another process holds the state home's task lock: then this one
    /// serves no tasks (a note on stderr says so). A bad
    /// `CODEWHALE_SCHEDULER_NOW` or an unusable store is an error.
    pub fn open(home: &Path, driver: Driver, o: HubOptions) -> Result<Hub, String> {
        let clock = clock::Clock::from_env()?;
        let lock = match owner::HubLock::acquire(home) {
            Ok(l) => l,
            Err(why) => {
                eprintln!("codewhale: tasks and automations not served here: {why}");
                return Ok(Hub {
                    active: Err(why),
                    _lock: None,
                });
            }
        };
        let tasks = queue::Tasks::open(home, driver, o.defaults).map_err(|e| e.to_string())?;
        runner::start_workers(&tasks, o.workers).map_err(|e| e.to_string())?;
        let automations = scheduler::Automations::open(home, tasks.clone(), clock, o.tick)
            .map_err(|e| e.to_string())?;
        Ok(Hub {
            active: Ok(Active { tasks, automations }),
            _lock: Some(lock),
        })
    }

    /// The running queue and scheduler, or 503 naming the process that has
    /// them.
    pub fn active(&self) -> Result<&Active, crate::server::error::ApiError> {
        self.active.as_ref().map_err(|why| {
            crate::server::error::ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "tasks_elsewhere",
                why.clone(),
            )
        })
    }
}
