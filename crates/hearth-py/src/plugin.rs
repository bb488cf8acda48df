//! A replacement policy written in Python, behind `hearth_core::Policy`.
//!
//! Like libCacheSim's PluginCache, the Rust side keeps the resident set and
//! the byte count; the Python object only decides. It is told about hits
//! (`hit(key, size)`) and admissions (`miss(key, size)`, after the evictions
//! that made room) and is asked for victims (`evict(key, size)` with the
//! request being admitted, returning a resident key). `remove(key)` is
//! called, when the object has it, for invalidations (`Cache.remove`).
//!
//! A policy cannot return errors, so the first Python exception is kept in
//! a shared slot; later calls do nothing and the driver raises it.

use std::sync::{Arc, Mutex};

use hearth_core::{key_map, Access, Key, KeyMap, Policy};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The first exception a plugin raised, shared with the driver.
pub type ErrorSlot = Arc<Mutex<Option<PyErr>>>;

pub struct PyPolicy {
    obj: Py<PyAny>,
    name: String,
    capacity: u64,
    used: u64,
    resident: KeyMap<u32>,
    error: ErrorSlot,
}

impl PyPolicy {
    pub fn new(py: Python<'_>, obj: Py<PyAny>, capacity: u64, error: ErrorSlot) -> PyResult<PyPolicy> {
        let bound = obj.bind(py);
        for method in ["hit", "miss", "evict"] {
            if !bound.hasattr(method)? {
                let ty = bound.get_type().name()?;
                return Err(PyValueError::new_err(format!(
                    "plugin policy {ty} has no method {method}(); it needs hit(key, size), miss(key, size) and \
                     evict(key, size)"
                )));
            }
        }
        let name = match bound.getattr_opt("name")? {
            Some(n) if !n.is_none() && !n.is_callable() => n.str()?.to_string(),
            _ => bound.get_type().name()?.to_string(),
        };
        Ok(PyPolicy { obj, name, capacity, used: 0, resident: key_map(1024), error })
    }

    fn failed(&self) -> bool {
        self.error.lock().unwrap().is_some()
    }

    fn fail(&self, e: PyErr) {
        let mut slot = self.error.lock().unwrap();
        if slot.is_none() {
            *slot = Some(e);
        }
    }

    /// Calls `method(*args)` on the plugin; `None` once anything failed.
    fn call<'py, A>(&self, py: Python<'py>, method: &str, args: A) -> Option<Bound<'py, PyAny>>
    where
        A: pyo3::call::PyCallArgs<'py>,
    {
        if self.failed() {
            return None;
        }
        match self.obj.bind(py).call_method1(method, args) {
            Ok(v) => Some(v),
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }
}

impl Policy for PyPolicy {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn occupancy(&self) -> u64 {
        self.used
    }
    fn len(&self) -> usize {
        self.resident.len()
    }
    fn contains(&self, key: Key) -> bool {
        self.resident.contains_key(&key)
    }
    fn lookup(&mut self, a: &Access) -> bool {
        if !self.resident.contains_key(&a.key) {
            return false;
        }
        Python::attach(|py| {
            self.call(py, "hit", (a.key, a.size));
        });
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        self.resident.insert(a.key, a.size);
        self.used += u64::from(a.size);
        Python::attach(|py| {
            self.call(py, "miss", (a.key, a.size));
        });
    }
    fn evict(&mut self, now: &Access) -> Option<Key> {
        let victim = Python::attach(|py| {
            let v = self.call(py, "evict", (now.key, now.size))?;
            match v.extract::<Key>() {
                Ok(k) if self.resident.contains_key(&k) => Some(k),
                Ok(k) => {
                    self.fail(PyValueError::new_err(format!(
                        "{}.evict() returned key {k}, which is not in the cache",
                        self.name
                    )));
                    None
                }
                Err(_) => {
                    let shown = v.repr().map(|r| r.to_string()).unwrap_or_default();
                    self.fail(PyValueError::new_err(format!(
                        "{}.evict() must return a resident key (an int), not {shown}",
                        self.name
                    )));
                    None
                }
            }
        })?;
        let size = self.resident.remove(&victim).expect("checked resident");
        self.used -= u64::from(size);
        Some(victim)
    }
    fn remove(&mut self, key: Key) -> bool {
        let Some(size) = self.resident.remove(&key) else { return false };
        self.used -= u64::from(size);
        Python::attach(|py| {
            if self.obj.bind(py).hasattr("remove").unwrap_or(false) {
                self.call(py, "remove", (key,));
            }
        });
        true
    }
}
