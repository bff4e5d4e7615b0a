//! Writing metric families whose values are read at scrape time, with
//! `prometheus-client`'s encoder (so that they look exactly like the
//! families it keeps itself).

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeGaugeValue, EncodeLabelSet, EncodeMetric,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// A label set of one label.
pub(crate) type Label<'a> = [(&'static str, &'a str); 1];

/// A counter family `name` (the `_total` suffix is added) with one sample
/// per `(labels, value)`.
pub(crate) fn counters<L: EncodeLabelSet>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (L, u64)>,
) -> std::fmt::Result {
    let help = sentence(help);
    let mut f = e.encode_descriptor(name, &help, None, ConstCounter::new(0u64).metric_type())?;
    for (l, v) in rows {
        ConstCounter::new(v).encode(f.encode_family(&l)?)?;
    }
    Ok(())
}

/// A counter without labels.
pub(crate) fn counter(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    v: u64,
) -> std::fmt::Result {
    let c = ConstCounter::new(v);
    c.encode(e.encode_descriptor(name, &sentence(help), None, c.metric_type())?)
}

/// A gauge family with one sample per `(labels, value)`.
pub(crate) fn gauges<L: EncodeLabelSet, N: EncodeGaugeValue + Copy + std::fmt::Debug>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (L, N)>,
) -> std::fmt::Result {
    let help = sentence(help);
    let mut f = e.encode_descriptor(name, &help, None, ConstGauge::new(0i64).metric_type())?;
    for (l, v) in rows {
        ConstGauge::new(v).encode(f.encode_family(&l)?)?;
    }
    Ok(())
}

/// A gauge without labels.
pub(crate) fn gauge<N: EncodeGaugeValue + Copy + std::fmt::Debug>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    v: N,
) -> std::fmt::Result {
    let g = ConstGauge::new(v);
    g.encode(e.encode_descriptor(name, &sentence(help), None, g.metric_type())?)
}

/// `help` ending with a full stop, as the registry writes the help of the
/// families it keeps.
fn sentence(help: &str) -> String {
    format!("{help}.")
}
