//! Cluster authentication: TLS 1.3 certificates and verifiers.
//!
//! The cluster secret (`rpc_secret`) deterministically gives an ed25519 key,
//! the cluster CA key. Every node that knows the secret can rebuild the same
//! CA and uses it to sign a certificate for its own node key. Peers accept
//! only certificates signed by that CA, so a node without the secret can
//! neither connect nor be connected to. When dialing, the verifier also
//! checks that the certificate's key is the node id that was asked for.
//! All signature checking is done by rustls / webpki (ring provider).

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber,
};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::NetError;
use crate::identity::{NodeId, NodeKey};

/// The DNS name every node certificate carries and every dial asks for. The
/// node's identity is checked through its key, not through this name.
pub(crate) const SERVER_NAME: &str = "node.hangar";
/// ALPN protocol id of this wire format (see doc/rpc.md).
pub(crate) const ALPN: &[u8] = b"hangar-rpc/1";
/// blake3 key-derivation context for the cluster CA key.
const CA_KEY_CONTEXT: &str = "hangar 2026-11 rpc cluster CA ed25519 key v1";

/// The TLS material of one node: cluster CA (as trust root), its own
/// certificate and key, and the server side configuration.
pub(crate) struct ClusterTls {
    provider: Arc<CryptoProvider>,
    roots: Arc<RootCertStore>,
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
    server: Arc<rustls::ServerConfig>,
}

fn tls_err(e: impl std::fmt::Display) -> NetError {
    NetError::Tls(e.to_string())
}

fn rcgen_key(key: &NodeKey) -> Result<KeyPair, NetError> {
    let der = PrivatePkcs8KeyDer::from(key.pkcs8_der()?);
    KeyPair::from_pkcs8_der_and_sign_algo(&der, &rcgen::PKCS_ED25519).map_err(tls_err)
}

impl ClusterTls {
    /// Builds the CA from the secret and signs a fresh certificate for
    /// `node`. The certificate gets a random serial number, so each start of
    /// a node (each incarnation) presents different certificate bytes.
    pub(crate) fn new(secret: &[u8; 32], node: &NodeKey) -> Result<ClusterTls, NetError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());

        let ca_key = rcgen_key(&NodeKey::from_seed(blake3::derive_key(
            CA_KEY_CONTEXT,
            secret,
        )))?;
        let mut ca_params = CertificateParams::default();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "hangar cluster CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        ca_params.serial_number = Some(SerialNumber::from_slice(&[1]));
        let ca_cert = ca_params.self_signed(&ca_key).map_err(tls_err)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let node_key = rcgen_key(node)?;
        let mut params = CertificateParams::new(vec![SERVER_NAME.to_string()]).map_err(tls_err)?;
        params.distinguished_name.push(
            DnType::CommonName,
            format!("hangar node {}", node.id().short()),
        );
        let mut serial: [u8; 16] = rand::random();
        serial[0] &= 0x7f;
        params.serial_number = Some(SerialNumber::from_slice(&serial));
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&node_key, &issuer).map_err(tls_err)?;

        let mut roots = RootCertStore::empty();
        roots.add(ca_cert.der().clone()).map_err(tls_err)?;
        let roots = Arc::new(roots);
        let cert = cert.der().clone();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(node.pkcs8_der()?));

        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
                .build()
                .map_err(tls_err)?;
        let mut server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(tls_err)?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(vec![cert.clone()], key.clone_key())
            .map_err(tls_err)?;
        server.alpn_protocols = vec![ALPN.to_vec()];
        server.max_early_data_size = 0;

        Ok(ClusterTls {
            provider,
            roots,
            cert,
            key,
            server: Arc::new(server),
        })
    }

    /// The server-side configuration (accepts any cluster member).
    pub(crate) fn server_config(&self) -> Arc<rustls::ServerConfig> {
        self.server.clone()
    }

    /// A client configuration that accepts only the node `expected`.
    pub(crate) fn client_config(&self, expected: NodeId) -> Result<rustls::ClientConfig, NetError> {
        let inner =
            WebPkiServerVerifier::builder_with_provider(self.roots.clone(), self.provider.clone())
                .build()
                .map_err(tls_err)?;
        let verifier = Arc::new(ExpectedNodeVerifier { inner, expected });
        let mut cfg = rustls::ClientConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(tls_err)?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_client_auth_cert(vec![self.cert.clone()], self.key.clone_key())
            .map_err(tls_err)?;
        cfg.alpn_protocols = vec![ALPN.to_vec()];
        Ok(cfg)
    }
}

/// The node id carried by a (already verified) peer certificate chain.
pub(crate) fn peer_node_id(certs: &[CertificateDer<'_>]) -> Result<NodeId, NetError> {
    let end_entity = certs
        .first()
        .ok_or_else(|| NetError::PeerRefused("peer sent no certificate".into()))?;
    let parsed = ParsedCertificate::try_from(end_entity)
        .map_err(|e| NetError::PeerRefused(format!("unparsable certificate: {e}")))?;
    crate::identity::node_id_from_spki_der(parsed.subject_public_key_info().as_ref())
}

/// Server verifier used when dialing: webpki's chain check against the
/// cluster CA, then a check that the certificate's key is the node id we
/// meant to reach.
#[derive(Debug)]
struct ExpectedNodeVerifier {
    inner: Arc<WebPkiServerVerifier>,
    expected: NodeId,
}

impl ServerCertVerifier for ExpectedNodeVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )?;
        let id = peer_node_id(std::slice::from_ref(end_entity))
            .map_err(|e| rustls::Error::General(e.to_string()))?;
        if id != self.expected {
            return Err(rustls::Error::General(format!(
                "peer presented node id {id} but {} was expected",
                self.expected
            )));
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
