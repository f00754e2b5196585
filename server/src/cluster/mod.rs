//! The cluster as built: the layout file (rows, racks, power, NVLink domains; Slurm's
//! topology file), where DCGM places each GPU against it, and the free capacity in the
//! segments jobs ask for. Pure: text and scheduler state in, plain values out.

pub mod layout;
pub mod placement;
pub mod segments;
