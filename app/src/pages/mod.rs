//! One module per page. Each page renders on the server with its data in the HTML
//! (readable with JavaScript off) and goes live after hydration.

pub mod admin;
pub mod alerts;
pub mod audit;
pub mod history;
pub mod incident;
pub mod job;
pub mod login;
pub mod node;
pub mod nodes;
pub mod overview;
pub mod racks;
pub mod reliability;
pub mod remediation;
pub mod reports;
pub mod thermal;
pub mod timeline;
pub mod topology;
