//! Binary traces of any fixed record layout, read through a column
//! specification with a `format=` ([`Columns`], [`Layout`]): the object id,
//! and optionally time (seconds), size (bytes), op (libCacheSim's operation
//! code, [`cache_op`]) and tenant (the client), each from its field.

use std::path::Path;

use hearth_core::Op;

use crate::columns::{Columns, Field, Layout};
use crate::error::TraceError;
use crate::input::{Input, Records};
use crate::readers::cache_op;
use crate::Request;

pub(crate) struct BinaryReader {
    records: Records,
    columns: Columns,
    layout: Layout,
    record: Vec<u8>,
    /// 1-based number of the record last read.
    number: u64,
}

impl BinaryReader {
    /// `columns` must have a layout.
    pub(crate) fn new(path: &Path, input: Input, columns: &Columns) -> Self {
        let layout = columns.layout.clone().expect("a binary column specification has a layout");
        let record = vec![0; layout.record_len()];
        BinaryReader { records: Records::new(path, input), columns: columns.clone(), layout, record, number: 0 }
    }

    fn read(&mut self) -> Result<Option<Request>, TraceError> {
        if !self.records.next_record(&mut self.record)? {
            return Ok(None);
        }
        self.number += 1;
        let id = self.field(Field::Id, self.columns.id, u64::MAX)?;
        let time_ns = match self.columns.time {
            Some(c) => self.field(Field::Time, c, u64::MAX / 1_000_000_000)? * 1_000_000_000,
            None => 0,
        };
        let len = match self.columns.size {
            Some(c) => self.field(Field::Size, c, u64::from(u32::MAX))? as u32,
            None => 1,
        };
        let op = match self.columns.op {
            Some(c) => cache_op(self.field(Field::Op, c, u64::from(u32::MAX))? as u32),
            None => Op::Read,
        };
        let client = match self.columns.client {
            Some(c) => self.field(Field::Client, c, u64::from(u32::MAX))? as u32,
            None => 0,
        };
        Ok(Some(Request { time_ns, client, op, offset: id, len, next_access: None }))
    }

    /// Field `column` of the record just read, checked to lie in 0..=`max`.
    fn field(&self, field: Field, column: usize, max: u64) -> Result<u64, TraceError> {
        let bad = |why: String| {
            let what = format!("record {}: field {column} ({}): {why}", self.number, field.key());
            self.records.record_error(self.record.len(), what)
        };
        let value = self.layout.read(&self.record, column).map_err(bad)?;
        u64::try_from(value).ok().filter(|&v| v <= max).ok_or_else(|| bad(format!("{value} is not in 0..={max}")))
    }
}

impl Iterator for BinaryReader {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.read().transpose()
    }
}
