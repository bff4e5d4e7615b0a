//! One call = one QUIC bidirectional stream: the caller's side
//! (`call_remote`) and the callee's side (`serve_stream`).

use std::time::Duration;

use quinn::{RecvStream, SendStream};

use crate::answer_time::CallTimer;
use crate::body::{Body, BodyEnd, recv_body, send_body};
use crate::endpoint::Priority;
use crate::error::NetError;
use crate::frame::{self, CODE_CANCELLED, MAX_MESSAGE_LEN, RequestHeader, ResponseHeader};
use crate::identity::NodeId;
use crate::registry::{ServeError, ServeOk};
use crate::state::MeshInner;

impl MeshInner {
    /// Sends a call to `to` and waits for the response message, all within
    /// `timeout`. The response body, if any, is returned as a stream.
    pub(crate) async fn call_remote(
        &self,
        to: NodeId,
        path: &str,
        msg: Vec<u8>,
        body: Option<Body>,
        priority: Priority,
        timeout: Duration,
    ) -> Result<(Vec<u8>, Option<Body>), NetError> {
        let crate::conn::PeerHandles {
            conn,
            gate,
            answers,
            answer_time,
        } = self.conn_to(to)?;
        // Only a foreground call without a request body times the peer: a
        // background one waits behind its priority, a body's transfer is
        // not the peer's answer time.
        let timer = CallTimer::start(
            (priority == Priority::Foreground && body.is_none()).then_some(&*answer_time),
        );
        let deadline = tokio::time::Instant::now() + timeout;
        let timed_out = || NetError::Timeout {
            endpoint: path.to_string(),
            after: timeout,
        };
        let (send, mut recv) = tokio::time::timeout_at(deadline, conn.open_bi())
            .await
            .map_err(|_| timed_out())??;
        let _ = send.set_priority(priority.quic());
        let sent = self.metrics().sent(path, &to);
        let received = self.metrics().received(path, &to);
        let header = RequestHeader {
            path: path.to_string(),
            timeout_ms: deadline
                .saturating_duration_since(tokio::time::Instant::now())
                .as_millis() as u64,
            priority: priority.wire(),
            has_body: body.is_some(),
        };
        // The request goes out from its own task: the callee may answer
        // (an error, or a response whose body echoes ours) before it has
        // read the whole request body, and the response must not wait for
        // the request to be fully sent.
        let sender = tokio::spawn(async move {
            // Background bodies to this peer yield while the whole request
            // (header included) is written.
            let _urgent = (priority != Priority::Background).then(|| gate.urgent());
            let mut guard = ResetOnDrop(Some(send));
            let send = guard.0.as_mut().expect("present until the end");
            let n = msg.len() as u64;
            frame::write_request(send, &header, msg).await?;
            sent.inc_by(n);
            let end = match body {
                Some(body) => send_body(send, body, &sent, &gate, priority).await?,
                None => BodyEnd::Sent,
            };
            // Finished, not reset, even when the body failed: its ERROR
            // frame must reach the callee.
            send.finish()?;
            guard.0 = None;
            match end {
                BodyEnd::Sent => Ok::<(), NetError>(()),
                BodyEnd::Failed(e) => Err(e),
            }
        });
        let recv_side = async {
            let head: ResponseHeader = frame::read_head(&mut recv).await?;
            answers.record();
            if head.status != frame::STATUS_OK {
                return Ok((head, Vec::new()));
            }
            let msg = frame::read_frame(&mut recv, MAX_MESSAGE_LEN).await?;
            received.inc_by(msg.len() as u64);
            Ok::<_, NetError>((head, msg))
        };
        let (head, msg) = match tokio::time::timeout_at(deadline, recv_side).await {
            Ok(Ok(r)) => {
                timer.answered();
                r
            }
            Ok(Err(e)) => {
                timer.forget();
                let _ = recv.stop(CODE_CANCELLED.into());
                // If our own body failed, that is the better explanation.
                if !sender.is_finished() {
                    // Nobody will read the rest of the request.
                    sender.abort();
                } else if let Ok(Err(body_err @ NetError::Body(_))) = sender.await {
                    return Err(body_err);
                }
                return Err(e);
            }
            Err(_) => {
                // Slow past the deadline: counted as waited.
                drop(timer);
                sender.abort();
                let _ = recv.stop(CODE_CANCELLED.into());
                return Err(timed_out());
            }
        };
        let message = head.message.unwrap_or_default();
        match head.status {
            frame::STATUS_OK => {}
            frame::STATUS_OVERLOADED => return Err(NetError::Overloaded(path.to_string())),
            frame::STATUS_NO_SUCH_ENDPOINT => {
                return Err(NetError::NoSuchEndpoint(path.to_string()));
            }
            frame::STATUS_TIMEOUT => return Err(timed_out()),
            _ => {
                return Err(NetError::Remote {
                    endpoint: path.to_string(),
                    message,
                });
            }
        }
        let body = head
            .has_body
            .then(|| recv_body(recv, timeout, received, path.to_string()));
        Ok((msg, body))
    }

    /// Answers one call opened by peer `from`.
    pub(crate) async fn serve_stream(&self, from: NodeId, mut send: SendStream, recv: RecvStream) {
        if let Err(e) = self.serve_stream_inner(from, &mut send, recv).await {
            tracing::debug!(peer = %from, error = %e, "call from peer failed");
            let _ = send.reset(CODE_CANCELLED.into());
        }
    }

    async fn serve_stream_inner(
        &self,
        from: NodeId,
        send: &mut SendStream,
        mut recv: RecvStream,
    ) -> Result<(), NetError> {
        // The request head follows the stream opening at once, but may wait
        // behind other streams for flow credit: bound it by the RPC timeout.
        let head: RequestHeader =
            tokio::time::timeout(self.cfg.rpc_timeout, frame::read_head(&mut recv))
                .await
                .map_err(|_| NetError::Protocol("request header not sent in time".into()))??;
        let priority = Priority::from_wire(head.priority);
        let _ = send.set_priority(priority.quic());
        let timeout = Duration::from_millis(head.timeout_ms);
        // The message follows the header at once: a peer's deadline is no
        // reason to hold the stream open longer than any call may take.
        let msg_wait = timeout.min(self.cfg.rpc_timeout);
        let msg = tokio::time::timeout(msg_wait, frame::read_frame(&mut recv, MAX_MESSAGE_LEN))
            .await
            .map_err(|_| NetError::Protocol("request message not sent in time".into()))??;
        // The path is the peer's to choose: only a registered one is a label.
        let entry = self.serve_entry(&head.path);
        let label = match entry {
            Some(_) => head.path.as_str(),
            None => crate::metrics::UNKNOWN_ENDPOINT,
        };
        let received = self.metrics().received(label, &from);
        received.inc_by(msg.len() as u64);

        // With a body, the receive side becomes the handler's body stream;
        // without, it has nothing more to say and is released here.
        let body = head
            .has_body
            .then(|| recv_body(recv, timeout, received, head.path.clone()));
        let result = match entry {
            None => Err(ServeError {
                status: frame::STATUS_NO_SUCH_ENDPOINT,
                message: format!("no endpoint {}", head.path),
            }),
            Some(entry) => {
                let stopped = send.stopped();
                tokio::select! {
                    r = entry.serve.serve(from, &msg, body, timeout) => r,
                    _ = stopped => {
                        tracing::debug!(peer = %from, path = %head.path, "caller abandoned the call");
                        return Ok(());
                    }
                }
            }
        };
        let sent = self.metrics().sent(label, &from);
        let gate = self.gate_for(from);
        let _urgent = (priority != Priority::Background).then(|| gate.urgent());
        match result {
            Ok(ServeOk { msg, body, _permit }) => {
                let head_out = ResponseHeader {
                    status: frame::STATUS_OK,
                    has_body: body.is_some(),
                    message: None,
                };
                let n = msg.len() as u64;
                frame::write_response(send, &head_out, Some(msg)).await?;
                sent.inc_by(n);
                let end = match body {
                    Some(body) => send_body(send, body, &sent, &gate, priority).await?,
                    None => BodyEnd::Sent,
                };
                // Finished, not reset, even when the body failed: the
                // caller reads the cause from its ERROR frame.
                send.finish()?;
                if let BodyEnd::Failed(e) = end {
                    tracing::debug!(peer = %from, error = %e, "answer's body failed midway");
                }
            }
            Err(e) => {
                if e.status == frame::STATUS_OVERLOADED {
                    self.metrics().record_rejected(&head.path);
                }
                let head_out = ResponseHeader {
                    status: e.status,
                    has_body: false,
                    message: Some(e.message),
                };
                frame::write_response(send, &head_out, None).await?;
                send.finish()?;
            }
        }
        Ok(())
    }
}

/// Resets the stream it holds when dropped, so an abandoned call is
/// visible as such to the callee instead of looking like a finished one.
struct ResetOnDrop(Option<SendStream>);

impl Drop for ResetOnDrop {
    fn drop(&mut self) {
        if let Some(s) = self.0.as_mut() {
            let _ = s.reset(CODE_CANCELLED.into());
        }
    }
}
