//! The ONNX protobuf messages, written by hand as `prost` messages with the field numbers
//! of onnx/onnx's `onnx/onnx.proto` (IR version 14, `IR_VERSION_2025_11_06` + 1): every
//! field of every message is declared, so that decoding a model and encoding it again
//! loses nothing (prost drops the fields it does not know). Scalar lists are packed only
//! where onnx.proto says `[packed = true]` (proto2's default is unpacked), so that a
//! model written by the reference implementation re-encodes to the same bytes.
//!
//! Enumerations are kept as their `i32` values (the constants of [`data_type`] and
//! [`attribute_type`] name the ones the rewrites use). prost gives each optional field a
//! getter of its own name that answers the default where the field is absent
//! (`node.name()`, `node.domain()`).

use std::collections::HashMap;

use prost::Message;

use crate::error::{Error, Result};

/// `TensorProto.DataType` values.
pub(crate) mod data_type {
    pub(crate) const UNDEFINED: i32 = 0;
    pub(crate) const FLOAT: i32 = 1;
    pub(crate) const UINT8: i32 = 2;
    pub(crate) const INT32: i32 = 6;
    pub(crate) const INT64: i32 = 7;
    pub(crate) const STRING: i32 = 8;
    pub(crate) const BOOL: i32 = 9;
    pub(crate) const FLOAT16: i32 = 10;
    pub(crate) const DOUBLE: i32 = 11;
}

/// `AttributeProto.AttributeType` values.
pub(crate) mod attribute_type {
    pub(crate) const FLOAT: i32 = 1;
    pub(crate) const INT: i32 = 2;
    pub(crate) const STRING: i32 = 3;
    pub(crate) const TENSOR: i32 = 4;
    #[cfg(test)]
    pub(crate) const GRAPH: i32 = 5;
    #[cfg(test)]
    pub(crate) const FLOATS: i32 = 6;
    pub(crate) const INTS: i32 = 7;
}

/// `AttributeProto`: a named attribute of a node (or a function's default).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct AttributeProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) name: Option<String>,
    #[prost(float, optional, tag = "2")]
    pub(crate) f: Option<f32>,
    #[prost(int64, optional, tag = "3")]
    pub(crate) i: Option<i64>,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub(crate) s: Option<Vec<u8>>,
    #[prost(message, optional, tag = "5")]
    pub(crate) t: Option<TensorProto>,
    #[prost(message, optional, tag = "6")]
    pub(crate) g: Option<GraphProto>,
    #[prost(float, repeated, packed = "false", tag = "7")]
    pub(crate) floats: Vec<f32>,
    #[prost(int64, repeated, packed = "false", tag = "8")]
    pub(crate) ints: Vec<i64>,
    #[prost(bytes = "vec", repeated, tag = "9")]
    pub(crate) strings: Vec<Vec<u8>>,
    #[prost(message, repeated, tag = "10")]
    pub(crate) tensors: Vec<TensorProto>,
    #[prost(message, repeated, tag = "11")]
    pub(crate) graphs: Vec<GraphProto>,
    #[prost(string, optional, tag = "13")]
    pub(crate) doc_string: Option<String>,
    #[prost(message, optional, tag = "14")]
    pub(crate) tp: Option<TypeProto>,
    #[prost(message, repeated, tag = "15")]
    pub(crate) type_protos: Vec<TypeProto>,
    /// `AttributeType`.
    #[prost(int32, optional, tag = "20")]
    pub(crate) r#type: Option<i32>,
    #[prost(string, optional, tag = "21")]
    pub(crate) ref_attr_name: Option<String>,
    #[prost(message, optional, tag = "22")]
    pub(crate) sparse_tensor: Option<SparseTensorProto>,
    #[prost(message, repeated, tag = "23")]
    pub(crate) sparse_tensors: Vec<SparseTensorProto>,
}

/// `ValueInfoProto`: a named value's type.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ValueInfoProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) name: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub(crate) r#type: Option<TypeProto>,
    #[prost(string, optional, tag = "3")]
    pub(crate) doc_string: Option<String>,
    #[prost(message, repeated, tag = "4")]
    pub(crate) metadata_props: Vec<StringStringEntryProto>,
}

/// `NodeProto`: one operator call.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct NodeProto {
    #[prost(string, repeated, tag = "1")]
    pub(crate) input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub(crate) output: Vec<String>,
    #[prost(string, optional, tag = "3")]
    pub(crate) name: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub(crate) op_type: Option<String>,
    #[prost(message, repeated, tag = "5")]
    pub(crate) attribute: Vec<AttributeProto>,
    #[prost(string, optional, tag = "6")]
    pub(crate) doc_string: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub(crate) domain: Option<String>,
    #[prost(string, optional, tag = "8")]
    pub(crate) overload: Option<String>,
    #[prost(message, repeated, tag = "9")]
    pub(crate) metadata_props: Vec<StringStringEntryProto>,
    #[prost(message, repeated, tag = "10")]
    pub(crate) device_configurations: Vec<NodeDeviceConfigurationProto>,
}

/// `IntIntListEntryProto`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct IntIntListEntryProto {
    #[prost(int64, optional, tag = "1")]
    pub(crate) key: Option<i64>,
    #[prost(int64, repeated, packed = "false", tag = "2")]
    pub(crate) value: Vec<i64>,
}

/// `NodeDeviceConfigurationProto`: how a node is distributed over devices.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct NodeDeviceConfigurationProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) configuration_id: Option<String>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) sharding_spec: Vec<ShardingSpecProto>,
    #[prost(int32, optional, tag = "3")]
    pub(crate) pipeline_stage: Option<i32>,
}

/// `ShardingSpecProto`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ShardingSpecProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) tensor_name: Option<String>,
    #[prost(int64, repeated, packed = "false", tag = "2")]
    pub(crate) device: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub(crate) index_to_device_group_map: Vec<IntIntListEntryProto>,
    #[prost(message, repeated, tag = "4")]
    pub(crate) sharded_dim: Vec<ShardedDimProto>,
}

/// `ShardedDimProto`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ShardedDimProto {
    #[prost(int64, optional, tag = "1")]
    pub(crate) axis: Option<i64>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) simple_sharding: Vec<SimpleShardedDimProto>,
}

/// `SimpleShardedDimProto`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct SimpleShardedDimProto {
    #[prost(oneof = "Dim", tags = "1, 2")]
    pub(crate) dim: Option<Dim>,
    #[prost(int64, optional, tag = "3")]
    pub(crate) num_shards: Option<i64>,
}

/// A dimension: `dim_value` or `dim_param` (the oneof of `SimpleShardedDimProto` and of
/// `TensorShapeProto.Dimension`, which share their tags).
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Dim {
    #[prost(int64, tag = "1")]
    Value(i64),
    #[prost(string, tag = "2")]
    Param(String),
}

/// `TrainingInfoProto`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct TrainingInfoProto {
    #[prost(message, optional, tag = "1")]
    pub(crate) initialization: Option<GraphProto>,
    #[prost(message, optional, tag = "2")]
    pub(crate) algorithm: Option<GraphProto>,
    #[prost(message, repeated, tag = "3")]
    pub(crate) initialization_binding: Vec<StringStringEntryProto>,
    #[prost(message, repeated, tag = "4")]
    pub(crate) update_binding: Vec<StringStringEntryProto>,
}

/// `ModelProto`: the file.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ModelProto {
    #[prost(int64, optional, tag = "1")]
    pub(crate) ir_version: Option<i64>,
    #[prost(string, optional, tag = "2")]
    pub(crate) producer_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub(crate) producer_version: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub(crate) domain: Option<String>,
    #[prost(int64, optional, tag = "5")]
    pub(crate) model_version: Option<i64>,
    #[prost(string, optional, tag = "6")]
    pub(crate) doc_string: Option<String>,
    #[prost(message, optional, tag = "7")]
    pub(crate) graph: Option<GraphProto>,
    #[prost(message, repeated, tag = "8")]
    pub(crate) opset_import: Vec<OperatorSetIdProto>,
    #[prost(message, repeated, tag = "14")]
    pub(crate) metadata_props: Vec<StringStringEntryProto>,
    #[prost(message, repeated, tag = "20")]
    pub(crate) training_info: Vec<TrainingInfoProto>,
    #[prost(message, repeated, tag = "25")]
    pub(crate) functions: Vec<FunctionProto>,
    #[prost(message, repeated, tag = "26")]
    pub(crate) configuration: Vec<DeviceConfigurationProto>,
}

/// `DeviceConfigurationProto`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct DeviceConfigurationProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) name: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub(crate) num_devices: Option<i32>,
    #[prost(string, repeated, tag = "3")]
    pub(crate) device: Vec<String>,
}

/// `StringStringEntryProto`: a metadata entry.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct StringStringEntryProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) key: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(crate) value: Option<String>,
}

/// `TensorAnnotation`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct TensorAnnotation {
    #[prost(string, optional, tag = "1")]
    pub(crate) tensor_name: Option<String>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) quant_parameter_tensor_names: Vec<StringStringEntryProto>,
}

/// `GraphProto`: nodes, initializers and the graph's inputs and outputs.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub(crate) node: Vec<NodeProto>,
    #[prost(string, optional, tag = "2")]
    pub(crate) name: Option<String>,
    #[prost(message, repeated, tag = "5")]
    pub(crate) initializer: Vec<TensorProto>,
    #[prost(string, optional, tag = "10")]
    pub(crate) doc_string: Option<String>,
    #[prost(message, repeated, tag = "11")]
    pub(crate) input: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    pub(crate) output: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "13")]
    pub(crate) value_info: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "14")]
    pub(crate) quantization_annotation: Vec<TensorAnnotation>,
    #[prost(message, repeated, tag = "15")]
    pub(crate) sparse_initializer: Vec<SparseTensorProto>,
    #[prost(message, repeated, tag = "16")]
    pub(crate) metadata_props: Vec<StringStringEntryProto>,
}

/// `TensorProto.Segment`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Segment {
    #[prost(int64, optional, tag = "1")]
    pub(crate) begin: Option<i64>,
    #[prost(int64, optional, tag = "2")]
    pub(crate) end: Option<i64>,
}

/// `TensorProto`: a constant tensor (an initializer, a `Constant`'s value).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct TensorProto {
    #[prost(int64, repeated, packed = "false", tag = "1")]
    pub(crate) dims: Vec<i64>,
    /// `DataType` ([`data_type`]).
    #[prost(int32, optional, tag = "2")]
    pub(crate) data_type: Option<i32>,
    #[prost(message, optional, tag = "3")]
    pub(crate) segment: Option<Segment>,
    #[prost(float, repeated, tag = "4")]
    pub(crate) float_data: Vec<f32>,
    #[prost(int32, repeated, tag = "5")]
    pub(crate) int32_data: Vec<i32>,
    #[prost(bytes = "vec", repeated, tag = "6")]
    pub(crate) string_data: Vec<Vec<u8>>,
    #[prost(int64, repeated, tag = "7")]
    pub(crate) int64_data: Vec<i64>,
    #[prost(string, optional, tag = "8")]
    pub(crate) name: Option<String>,
    #[prost(bytes = "vec", optional, tag = "9")]
    pub(crate) raw_data: Option<Vec<u8>>,
    #[prost(double, repeated, tag = "10")]
    pub(crate) double_data: Vec<f64>,
    #[prost(uint64, repeated, tag = "11")]
    pub(crate) uint64_data: Vec<u64>,
    #[prost(string, optional, tag = "12")]
    pub(crate) doc_string: Option<String>,
    #[prost(message, repeated, tag = "13")]
    pub(crate) external_data: Vec<StringStringEntryProto>,
    /// `DataLocation`: 0 default, 1 external.
    #[prost(int32, optional, tag = "14")]
    pub(crate) data_location: Option<i32>,
    #[prost(message, repeated, tag = "16")]
    pub(crate) metadata_props: Vec<StringStringEntryProto>,
}

/// `SparseTensorProto`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct SparseTensorProto {
    #[prost(message, optional, tag = "1")]
    pub(crate) values: Option<TensorProto>,
    #[prost(message, optional, tag = "2")]
    pub(crate) indices: Option<TensorProto>,
    #[prost(int64, repeated, packed = "false", tag = "3")]
    pub(crate) dims: Vec<i64>,
}

/// `TensorShapeProto`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub(crate) dim: Vec<Dimension>,
}

/// `TensorShapeProto.Dimension`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Dimension {
    #[prost(oneof = "Dim", tags = "1, 2")]
    pub(crate) value: Option<Dim>,
    #[prost(string, optional, tag = "3")]
    pub(crate) denotation: Option<String>,
}

/// `TypeProto`: a value's type.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct TypeProto {
    #[prost(oneof = "Type", tags = "1, 4, 5, 7, 8, 9")]
    pub(crate) value: Option<Type>,
    #[prost(string, optional, tag = "6")]
    pub(crate) denotation: Option<String>,
}

/// The oneof `TypeProto.value`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Type {
    #[prost(message, tag = "1")]
    Tensor(TensorType),
    #[prost(message, tag = "4")]
    Sequence(Box<SequenceType>),
    #[prost(message, tag = "5")]
    Map(Box<MapType>),
    #[prost(message, tag = "7")]
    Opaque(OpaqueType),
    #[prost(message, tag = "8")]
    SparseTensor(TensorType),
    #[prost(message, tag = "9")]
    Optional(Box<SequenceType>),
}

/// `TypeProto.Tensor` (and `TypeProto.SparseTensor`, the same fields).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct TensorType {
    #[prost(int32, optional, tag = "1")]
    pub(crate) elem_type: Option<i32>,
    #[prost(message, optional, tag = "2")]
    pub(crate) shape: Option<TensorShapeProto>,
}

/// `TypeProto.Sequence` (and `TypeProto.Optional`, the same field).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct SequenceType {
    #[prost(message, optional, boxed, tag = "1")]
    pub(crate) elem_type: Option<Box<TypeProto>>,
}

/// `TypeProto.Map`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct MapType {
    #[prost(int32, optional, tag = "1")]
    pub(crate) key_type: Option<i32>,
    #[prost(message, optional, boxed, tag = "2")]
    pub(crate) value_type: Option<Box<TypeProto>>,
}

/// `TypeProto.Opaque`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct OpaqueType {
    #[prost(string, optional, tag = "1")]
    pub(crate) domain: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(crate) name: Option<String>,
}

/// `OperatorSetIdProto`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct OperatorSetIdProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) domain: Option<String>,
    #[prost(int64, optional, tag = "2")]
    pub(crate) version: Option<i64>,
}

/// `FunctionProto`: a model-local function.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct FunctionProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) name: Option<String>,
    #[prost(string, repeated, tag = "4")]
    pub(crate) input: Vec<String>,
    #[prost(string, repeated, tag = "5")]
    pub(crate) output: Vec<String>,
    #[prost(string, repeated, tag = "6")]
    pub(crate) attribute: Vec<String>,
    #[prost(message, repeated, tag = "7")]
    pub(crate) node: Vec<NodeProto>,
    #[prost(string, optional, tag = "8")]
    pub(crate) doc_string: Option<String>,
    #[prost(message, repeated, tag = "9")]
    pub(crate) opset_import: Vec<OperatorSetIdProto>,
    #[prost(string, optional, tag = "10")]
    pub(crate) domain: Option<String>,
    #[prost(message, repeated, tag = "11")]
    pub(crate) attribute_proto: Vec<AttributeProto>,
    #[prost(message, repeated, tag = "12")]
    pub(crate) value_info: Vec<ValueInfoProto>,
    #[prost(string, optional, tag = "13")]
    pub(crate) overload: Option<String>,
    #[prost(message, repeated, tag = "14")]
    pub(crate) metadata_props: Vec<StringStringEntryProto>,
}

impl ModelProto {
    /// Decodes a model file's bytes; `what` names it in the error.
    pub(crate) fn decode_model(bytes: &[u8], what: &str) -> Result<Self> {
        Self::decode(bytes).map_err(|e| Error::ModelContract {
            model: what.to_string(),
            message: format!("is not an ONNX model (protobuf: {e})"),
        })
    }

    /// The opset version imported for `domain` ("" and "ai.onnx" are the same domain).
    pub(crate) fn opset(&self, domain: &str) -> Option<i64> {
        let norm = |d: &str| if d == "ai.onnx" { String::new() } else { d.to_string() };
        self.opset_import.iter().find(|o| norm(o.domain.as_deref().unwrap_or("")) == norm(domain))?.version
    }
}

impl GraphProto {
    /// Adds every name in the graph and its subgraphs (values and nodes) to `used`.
    pub(crate) fn names(&self, used: &mut std::collections::HashSet<String>) {
        let values = self.input.iter().chain(&self.output).chain(&self.value_info).filter_map(|v| v.name.clone());
        used.extend(values.chain(self.initializer.iter().filter_map(|t| t.name.clone())));
        for n in &self.node {
            used.extend(n.input.iter().chain(&n.output).cloned().chain(n.name.clone()));
            for sub in n.attribute.iter().flat_map(|a| a.g.iter().chain(&a.graphs)) {
                sub.names(used);
            }
        }
    }
}

impl NodeProto {
    /// The operator's name.
    pub(crate) fn op(&self) -> &str {
        self.op_type.as_deref().unwrap_or("")
    }

    /// The attribute named `name`.
    pub(crate) fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.attribute.iter().find(|a| a.name.as_deref() == Some(name))
    }

    /// The attribute named `name`, to change.
    pub(crate) fn attr_mut(&mut self, name: &str) -> Option<&mut AttributeProto> {
        self.attribute.iter_mut().find(|a| a.name.as_deref() == Some(name))
    }

    /// An integer attribute.
    pub(crate) fn int(&self, name: &str) -> Option<i64> {
        self.attr(name).and_then(|a| a.i)
    }

    /// A list-of-integers attribute.
    pub(crate) fn ints(&self, name: &str) -> Option<&[i64]> {
        self.attr(name).map(|a| a.ints.as_slice())
    }

    /// A string attribute, as text.
    pub(crate) fn string(&self, name: &str) -> Option<String> {
        self.attr(name).and_then(|a| a.s.as_deref()).map(|s| String::from_utf8_lossy(s).into_owned())
    }

    /// Input `i`, where it is given and not empty (an omitted optional input).
    pub(crate) fn input_at(&self, i: usize) -> Option<&str> {
        self.input.get(i).map(String::as_str).filter(|s| !s.is_empty())
    }
}

impl AttributeProto {
    /// An integer attribute.
    pub(crate) fn int(name: &str, i: i64) -> Self {
        Self { name: Some(name.into()), i: Some(i), r#type: Some(attribute_type::INT), ..Default::default() }
    }

    /// A list-of-integers attribute.
    pub(crate) fn ints(name: &str, ints: Vec<i64>) -> Self {
        Self { name: Some(name.into()), ints, r#type: Some(attribute_type::INTS), ..Default::default() }
    }

    /// A string attribute.
    pub(crate) fn string(name: &str, s: &str) -> Self {
        Self { name: Some(name.into()), s: Some(s.into()), r#type: Some(attribute_type::STRING), ..Default::default() }
    }

    /// A tensor attribute.
    pub(crate) fn tensor(name: &str, t: TensorProto) -> Self {
        Self { name: Some(name.into()), t: Some(t), r#type: Some(attribute_type::TENSOR), ..Default::default() }
    }
}

impl NodeProto {
    /// A node of the default domain.
    pub(crate) fn new(op: &str, name: String, input: Vec<String>, output: Vec<String>) -> Self {
        Self { op_type: Some(op.into()), name: Some(name), input, output, ..Default::default() }
    }
}

impl ValueInfoProto {
    /// The tensor type, where the value is a tensor.
    pub(crate) fn tensor_type(&self) -> Option<&TensorType> {
        match self.r#type.as_ref()?.value.as_ref()? {
            Type::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The tensor type, to change.
    pub(crate) fn tensor_type_mut(&mut self) -> Option<&mut TensorType> {
        match self.r#type.as_mut()?.value.as_mut()? {
            Type::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The element type of a tensor value.
    pub(crate) fn elem_type(&self) -> Option<i32> {
        self.tensor_type().and_then(|t| t.elem_type)
    }

    /// The dimensions of a tensor value: `Some(n)` for a fixed one, `None` for a symbol or
    /// an unknown one; `None` overall where the shape is not given.
    pub(crate) fn dims(&self) -> Option<Vec<Option<i64>>> {
        let shape = self.tensor_type()?.shape.as_ref()?;
        Some(shape.dim.iter().map(|d| if let Some(Dim::Value(v)) = d.value { Some(v) } else { None }).collect())
    }
}

impl TensorProto {
    /// The element type.
    pub(crate) fn dtype(&self) -> i32 {
        self.data_type.unwrap_or(data_type::UNDEFINED)
    }

    /// The number of elements.
    pub(crate) fn elements(&self) -> usize {
        self.dims.iter().map(|&d| d.max(0) as usize).product()
    }

    /// Whether the data lives in an external file.
    pub(crate) fn is_external(&self) -> bool {
        self.data_location == Some(1)
    }

    /// A float32 tensor's values (`raw_data` little-endian or `float_data`).
    pub(crate) fn floats(&self) -> Result<Vec<f32>> {
        let name = self.name.as_deref().unwrap_or("");
        if self.dtype() != data_type::FLOAT {
            return Err(Error::Internal(format!("tensor `{name}` is of type {}, not float32", self.dtype())));
        }
        if self.is_external() {
            return Err(Error::InvalidArgument(format!("tensor `{name}` keeps its data in an external file")));
        }
        let values: Vec<f32> = match &self.raw_data {
            Some(raw) => raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
            None => self.float_data.clone(),
        };
        if values.len() != self.elements() {
            return Err(Error::InvalidArgument(format!(
                "tensor `{name}` holds {} values for dims {:?}",
                values.len(),
                self.dims
            )));
        }
        Ok(values)
    }

    /// A float32 tensor with `values`, stored as `raw_data`.
    pub(crate) fn from_floats(name: &str, dims: Vec<i64>, values: &[f32]) -> Self {
        Self {
            name: Some(name.into()),
            dims,
            data_type: Some(data_type::FLOAT),
            raw_data: Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
            ..Default::default()
        }
    }

    /// A float16 tensor with `values` (rounded to the nearest half), stored as `raw_data`.
    pub(crate) fn from_floats_as_halves(name: &str, dims: Vec<i64>, values: &[f32]) -> Self {
        Self {
            name: Some(name.into()),
            dims,
            data_type: Some(data_type::FLOAT16),
            raw_data: Some(values.iter().flat_map(|&v| half::f16::from_f32(v).to_bits().to_le_bytes()).collect()),
            ..Default::default()
        }
    }
}

/// The element type of each output of `node`, from its inputs' types (`ty`) and its
/// attributes, by the operator schemas' type constraints; `None` where the rules cannot
/// tell. Most operators give their first input's type; those listed give a fixed type
/// or one named by an attribute or another input. `If`, `Loop` and `Scan` take their
/// subgraphs' declared output types.
pub(crate) fn output_types(node: &NodeProto, ty: &dyn Fn(&str) -> Option<i32>) -> Vec<Option<i32>> {
    use data_type::*;
    let n = node.output.len();
    let input = |i: usize| node.input_at(i).and_then(ty);
    let first = node.input.iter().filter(|s| !s.is_empty()).find_map(|s| ty(s));
    let attr_or = |name: &str, default: Option<i32>| node.int(name).map(|v| v as i32).or(default);
    let all = |t: Option<i32>| vec![t; n];
    let graph_outputs = |attr: &str, skip: usize| -> Vec<Option<i32>> {
        let outs = node.attr(attr).and_then(|a| a.g.as_ref()).map(|g| g.output.as_slice()).unwrap_or(&[]);
        let mut v: Vec<Option<i32>> = outs.iter().skip(skip).map(ValueInfoProto::elem_type).collect();
        v.resize(n, None);
        v
    };
    match node.op() {
        "Cast" => all(attr_or("to", None)),
        "CastLike" | "Where" => all(input(1)),
        "Constant" => all(constant_type(node)),
        "ConstantOfShape" => all(node.attr("value").and_then(|a| a.t.as_ref()).map(TensorProto::dtype).or(Some(FLOAT))),
        "Shape" | "Size" | "NonZero" | "ArgMax" | "ArgMin" | "NonMaxSuppression" => all(Some(INT64)),
        "TopK" | "MaxPool" | "Unique" => (0..n).map(|i| if i == 0 { first } else { Some(INT64) }).collect(),
        "Dropout" => (0..n).map(|i| if i == 0 { first } else { Some(BOOL) }).collect(),
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "Not" | "And" | "Or" | "Xor" | "IsNaN"
        | "IsInf" | "RegexFullMatch" => all(Some(BOOL)),
        "RandomNormal" | "RandomUniform" => all(attr_or("dtype", Some(FLOAT))),
        "RandomNormalLike" | "RandomUniformLike" | "EyeLike" | "Bernoulli" => all(attr_or("dtype", first)),
        "Multinomial" => all(attr_or("dtype", Some(INT32))),
        "HannWindow" | "HammingWindow" | "BlackmanWindow" | "MelWeightMatrix" => {
            all(attr_or("output_datatype", Some(FLOAT)))
        }
        "QuantizeLinear" => all(input(2).or(attr_or("output_dtype", None)).or(Some(UINT8))),
        "DequantizeLinear" => all(input(1)),
        "DynamicQuantizeLinear" => vec![Some(UINT8), Some(FLOAT), Some(UINT8)].into_iter().take(n).collect(),
        "MatMulInteger" | "ConvInteger" => all(Some(INT32)),
        "QLinearConv" | "QLinearMatMul" => all(input(7)),
        "OneHot" => all(input(2)),
        "TfIdfVectorizer" => all(Some(FLOAT)),
        "StringConcat" | "StringSplit" | "StringNormalizer" => {
            (0..n).map(|i| Some(if i == 0 { STRING } else { INT64 })).collect()
        }
        "ImageDecoder" => all(Some(UINT8)),
        "LayerNormalization" => {
            let stash = attr_or("stash_type", Some(FLOAT));
            (0..n).map(|i| if i == 0 { first } else { stash }).collect()
        }
        "If" => graph_outputs("then_branch", 0),
        "Loop" => graph_outputs("body", 1),
        "Scan" => graph_outputs("body", 0),
        _ if node.input.iter().all(String::is_empty) => all(None),
        _ => all(first),
    }
}

/// A `Constant` node's element type, from whichever value attribute it has.
fn constant_type(node: &NodeProto) -> Option<i32> {
    let a = node.attribute.first()?;
    match a.name.as_deref()? {
        "value" => a.t.as_ref().map(TensorProto::dtype),
        "sparse_value" => a.sparse_tensor.as_ref()?.values.as_ref().map(TensorProto::dtype),
        "value_float" | "value_floats" => Some(data_type::FLOAT),
        "value_int" | "value_ints" => Some(data_type::INT64),
        "value_string" | "value_strings" => Some(data_type::STRING),
        _ => None,
    }
}

/// The element type of every tensor value of `graph` (its inputs, initializers and node
/// outputs, with `outer` for the names of enclosing graphs), by [`output_types`]; where
/// the rules cannot tell, the graph's `value_info` decides, and where that is silent too,
/// the answer is an error naming the node. Values that are not tensors (sequences, maps)
/// get [`data_type::UNDEFINED`] when declared so.
pub(crate) fn elem_types(graph: &GraphProto, outer: &HashMap<String, i32>) -> Result<HashMap<String, i32>> {
    let mut types = outer.clone();
    let declared: HashMap<&str, i32> = graph
        .value_info
        .iter()
        .chain(&graph.output)
        .filter_map(|v| Some((v.name.as_deref()?, v.elem_type().unwrap_or(data_type::UNDEFINED))))
        .collect();
    for v in &graph.input {
        types.insert(v.name.clone().unwrap_or_default(), v.elem_type().unwrap_or(data_type::UNDEFINED));
    }
    for t in &graph.initializer {
        types.insert(t.name.clone().unwrap_or_default(), t.dtype());
    }
    for t in &graph.sparse_initializer {
        if let Some(values) = &t.values {
            types.insert(values.name.clone().unwrap_or_default(), values.dtype());
        }
    }
    for node in &graph.node {
        let inferred = output_types(node, &|name| types.get(name).copied());
        // An operator of another domain (com.microsoft, a custom op) is known by its declaration first.
        let custom = !matches!(node.domain.as_deref().unwrap_or(""), "" | "ai.onnx");
        for (out, t) in node.output.iter().zip(inferred) {
            if out.is_empty() {
                continue;
            }
            let said = declared.get(out.as_str()).copied();
            let Some(t) = (if custom { said.or(t) } else { t.or(said) }) else {
                return Err(Error::InvalidArgument(format!(
                    "cannot tell the element type of `{out}`, an output of node `{}` ({}), and the model declares none",
                    node.name(),
                    node.op()
                )));
            };
            types.insert(out.clone(), t);
        }
    }
    Ok(types)
}
