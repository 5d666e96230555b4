//! A small GGUF writer for tests: builds headers in memory and writes files
//! whose tensor data is a sparse hole (`File::set_len`), so a model of any
//! shape costs a few hundred bytes of disk.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use crate::types::ValueType;
use crate::value::{Array, Value};

#[derive(Clone, Debug)]
pub struct TensorSpec {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: u32,
}

#[derive(Clone, Debug)]
pub struct Builder {
    pub version: u32,
    pub big_endian: bool,
    pub kv: Vec<(String, Value)>,
    pub tensors: Vec<TensorSpec>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            version: 3,
            big_endian: false,
            kv: Vec::new(),
            tensors: Vec::new(),
        }
    }
}

pub fn arr(elem_type: ValueType, values: Vec<Value>) -> Value {
    Value::Array(Array {
        elem_type,
        len: values.len() as u64,
        values: Some(values),
    })
}

impl Builder {
    pub fn kv(mut self, key: &str, value: Value) -> Self {
        self.kv.push((key.to_string(), value));
        self
    }

    pub fn u32(self, key: &str, v: u32) -> Self {
        self.kv(key, Value::U32(v))
    }

    pub fn str(self, key: &str, v: &str) -> Self {
        self.kv(key, Value::String(v.to_string()))
    }

    /// `general.architecture` plus `{arch}.KEY` u32 values.
    pub fn arch(mut self, arch: &str, keys: &[(&str, u32)]) -> Self {
        self = self.str("general.architecture", arch);
        for (k, v) in keys {
            self = self.u32(&format!("{arch}.{k}"), *v);
        }
        self
    }

    pub fn tensor(mut self, name: &str, dims: &[u64], ty: u32) -> Self {
        self.tensors.push(TensorSpec {
            name: name.to_string(),
            dims: dims.to_vec(),
            ty,
        });
        self
    }

    fn alignment(&self) -> u64 {
        self.kv
            .iter()
            .find(|(k, _)| k == "general.alignment")
            .and_then(|(_, v)| v.as_u64())
            .unwrap_or(32)
            .max(1)
    }

    /// Data bytes of each tensor (types from the crate's table; a type id
    /// the table lacks gets no data).
    fn tensor_bytes(t: &TensorSpec) -> u64 {
        let Some(info) = crate::types::GgmlType(t.ty).info() else {
            return 0;
        };
        let ne0 = t.dims.first().copied().unwrap_or(1);
        t.dims
            .iter()
            .skip(1)
            .fold(ne0 / info.block_size * info.type_size, |a, &d| a * d)
    }

    /// Offsets of the tensors in the data section and where the last one
    /// ends (no padding after it, so any shorter file is truncated).
    fn layout(&self) -> (Vec<u64>, u64) {
        let a = self.alignment();
        let mut offsets = Vec::new();
        let (mut at, mut end) = (0, 0);
        for t in &self.tensors {
            offsets.push(at);
            end = at + Self::tensor_bytes(t);
            at = end.div_ceil(a) * a;
        }
        (offsets, end)
    }

    fn put_u32(&self, out: &mut Vec<u8>, v: u32) {
        out.extend(if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }

    fn put_u64(&self, out: &mut Vec<u8>, v: u64) {
        out.extend(if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }

    fn put_str(&self, out: &mut Vec<u8>, s: &str) {
        self.put_u64(out, s.len() as u64);
        out.extend(s.as_bytes());
    }

    fn put_value(&self, out: &mut Vec<u8>, v: &Value) {
        let be = self.big_endian;
        macro_rules! num {
            ($x:expr) => {
                out.extend(if be { $x.to_be_bytes() } else { $x.to_le_bytes() })
            };
        }
        match v {
            Value::U8(x) => num!(x),
            Value::I8(x) => num!(x),
            Value::U16(x) => num!(x),
            Value::I16(x) => num!(x),
            Value::U32(x) => num!(x),
            Value::I32(x) => num!(x),
            Value::F32(x) => num!(x),
            Value::Bool(x) => out.push(u8::from(*x)),
            Value::String(s) => self.put_str(out, s),
            Value::Array(a) => {
                self.put_u32(out, a.elem_type.id());
                let values = a.values.as_ref().expect("test arrays carry values");
                self.put_u64(out, values.len() as u64);
                for e in values {
                    self.put_value(out, e);
                }
            }
            Value::U64(x) => num!(x),
            Value::I64(x) => num!(x),
            Value::F64(x) => num!(x),
            Value::LongString(_) => panic!("the writer cannot write a skipped string"),
        }
    }

    /// The header: magic, version, counts, metadata, tensor infos (no
    /// padding, no data).
    pub fn header_bytes(&self) -> Vec<u8> {
        self.header_bytes_with(None)
    }

    /// The header with the first tensor's dimensions replaced by `dims`
    /// (which may be hostile); the data layout stays that of the builder.
    fn header_bytes_with(&self, first_dims: Option<&[u64]>) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        self.put_u32(&mut out, self.version);
        self.put_u64(&mut out, self.tensors.len() as u64);
        self.put_u64(&mut out, self.kv.len() as u64);
        for (k, v) in &self.kv {
            self.put_str(&mut out, k);
            self.put_u32(&mut out, v.value_type().id());
            self.put_value(&mut out, v);
        }
        let (offsets, _) = self.layout();
        for (i, (t, off)) in self.tensors.iter().zip(offsets).enumerate() {
            let dims = match first_dims {
                Some(d) if i == 0 => d,
                _ => &t.dims,
            };
            self.put_str(&mut out, &t.name);
            self.put_u32(&mut out, dims.len() as u32);
            for &d in dims {
                self.put_u64(&mut out, d);
            }
            self.put_u32(&mut out, t.ty);
            self.put_u64(&mut out, off);
        }
        out
    }

    /// The whole file in memory, data zero-filled (small models only).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_bytes_from(self.header_bytes())
    }

    /// The whole file with the first tensor's dimensions replaced.
    pub fn to_bytes_with_dims(&self, dims: &[u64]) -> Vec<u8> {
        self.to_bytes_from(self.header_bytes_with(Some(dims)))
    }

    fn to_bytes_from(&self, header: Vec<u8>) -> Vec<u8> {
        let mut out = header;
        let a = self.alignment() as usize;
        out.resize(out.len().div_ceil(a) * a, 0);
        let (_, data) = self.layout();
        out.resize(out.len() + data as usize, 0);
        out
    }

    /// Writes the header and extends the file over the data as a hole.
    pub fn write(&self, path: &Path) {
        let header = self.header_bytes();
        let a = self.alignment();
        let data_offset = (header.len() as u64).div_ceil(a) * a;
        let (_, data) = self.layout();
        let mut f = File::create(path).unwrap();
        f.write_all(&header).unwrap();
        f.set_len(data_offset + data).unwrap();
    }
}

/// The crate's own tests only: tempfile is a dev-dependency, and the
/// `testutil` feature is built for other crates' tests without it.
#[cfg(test)]
impl Builder {
    /// Writes the model to a temporary file and opens it.
    pub fn open(&self) -> crate::Model {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.gguf");
        self.write(&path);
        crate::open(&path).expect("valid test model")
    }
}
