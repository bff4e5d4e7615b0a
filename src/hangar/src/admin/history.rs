//! The history operations behind the console's plots: every node's recent
//! history (`GetClusterHistory`) and a bucket's usage over time with its
//! quotas (`GetBucketHistory`), gathered from the nodes' own rings over
//! `hangar/admin/history` (`hangar_api_admin::history`).

use hangar_api_admin::history::merge_usage;
use hangar_api_admin::history::rpc::{HistoryAnswer, HistoryRequest, MAX_WINDOW_SECS, gather};
use hangar_api_admin::history_answers::{BucketHistory, ClusterHistory, NodeSeries};
use hangar_api_admin::proto::AdminError;
use hangar_model::ModelError;

use crate::admin::cluster::{hostname, known_nodes};
use crate::admin::error::model_error;
use crate::admin::state::AdminState;

/// The window drawn when none is asked.
pub const DEFAULT_WINDOW_SECS: u64 = 900;

/// The window asked, within the ring's hour.
fn window(asked: Option<u64>, default: u64) -> Result<u64, AdminError> {
    match asked.unwrap_or(default) {
        0 => Err(AdminError::bad("window_secs must be at least 1")),
        w => Ok(w.min(MAX_WINDOW_SECS)),
    }
}

/// `GetClusterHistory`.
pub async fn cluster(st: &AdminState, asked: Option<u64>) -> Result<ClusterHistory, AdminError> {
    let secs = window(asked, DEFAULT_WINDOW_SECS)?;
    let (ids, up) = known_nodes(st);
    let me = st.cluster.id();
    let mut answers = gather(
        &st.histories,
        ids.iter().copied().filter(|i| up.contains(i) && *i != me),
        HistoryRequest::Node { secs },
    )
    .await;
    let nodes = ids
        .iter()
        .map(|id| {
            let (history, error) = if *id == me {
                (Some(st.history.node(secs)), None)
            } else {
                match answers.remove(id) {
                    Some(Ok(HistoryAnswer::Node(h))) => (Some(h), None),
                    Some(Ok(HistoryAnswer::Bucket(_))) => {
                        (None, Some("answered another question".to_owned()))
                    }
                    Some(Err(e)) => (None, Some(e)),
                    None => (None, Some("node is down".to_owned())),
                }
            };
            NodeSeries {
                id: id.to_string(),
                hostname: hostname(st, id),
                is_up: *id == me || up.contains(id),
                is_self: *id == me,
                history,
                error,
            }
        })
        .collect();
    Ok(ClusterHistory {
        window_secs: secs,
        nodes,
    })
}

/// `GetBucketHistory`: the bucket's usage as the nodes that hold its
/// counters recorded it, merged slot by slot.
pub async fn bucket(
    st: &AdminState,
    name: &str,
    asked: Option<u64>,
) -> Result<BucketHistory, AdminError> {
    let secs = window(asked, MAX_WINDOW_SECS)?;
    let b = st
        .model
        .buckets()
        .get_bucket(name)
        .await
        .map_err(model_error)?
        .ok_or_else(|| model_error(ModelError::NoSuchBucket(name.to_owned())))?;
    let (ids, up) = known_nodes(st);
    let me = st.cluster.id();
    let req = HistoryRequest::Bucket {
        id: b.id.clone(),
        secs,
    };
    let mine = hex::decode(&b.id).map_or_else(|_| Vec::new(), |id| st.history.bucket(&id, secs));
    let others = gather(
        &st.histories,
        ids.into_iter().filter(|i| up.contains(i) && *i != me),
        req,
    )
    .await
    .into_values()
    .filter_map(|a| match a {
        Ok(HistoryAnswer::Bucket(points)) => Some(points),
        _ => None,
    });
    let q = b.quotas();
    Ok(BucketHistory {
        bucket: b.name.clone(),
        interval_secs: hangar_api_admin::history::BUCKET_INTERVAL_SECS,
        points: merge_usage(std::iter::once(mine).chain(others)),
        max_size: q.max_size,
        max_objects: q.max_objects,
        id: b.id,
    })
}
